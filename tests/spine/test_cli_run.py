"""The CLI end to end on the CPU: real tuner, real evaluator (interpreter), real git, a real kill."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.sessions.journal import Journal

ROOT = Path(__file__).resolve().parents[2]


def warpsmith(*args, cwd, input=None, timeout=300):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "warpsmith", *args], cwd=cwd, input=input, text=True,
                          capture_output=True, env=env, timeout=timeout)


def only_session(cwd: Path) -> Path:
    (s,) = list((cwd / ".warpsmith" / "sessions").iterdir())
    return s


def journal(session: Path) -> list[dict]:
    # The harness's reader, as resume uses it: a line torn by a kill (or still being appended
    # while we poll) is skipped, not a JSONDecodeError in the test.
    return Journal(session / "journal.jsonl").read()


def git_refs(session: Path) -> dict[str, str]:
    out = subprocess.run(["git", "-C", str(session / "repo"), "for-each-ref", "--format=%(refname) %(objectname)"],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split(" ") for line in out.splitlines())


@pytest.mark.slow
def test_three_tuner_iterations_decided_on_stdin_show_in_git_journal_and_results(tmp_path):
    # y + yes: keep against the recommendation (no timing on CPU) is an override; n: revert with a reason.
    answers = "y\nyes\nn: too risky\ny\nyes\n"
    r = warpsmith("run", "softmax", "--headless", "--agent", "tuner", "--iterations", "3", cwd=tmp_path, input=answers)
    assert r.returncode == 0, r.stderr
    s = only_session(tmp_path)
    refs = git_refs(s)
    assert {"refs/kept/0001", "refs/kept/0003"} <= set(refs) and "refs/kept/0002" not in refs
    assert refs["refs/heads/best"] == refs["refs/candidates/0003"]
    decisions = [(d["iteration"], d["action"], d["override"], d["reason"]) for d in journal(s) if d["kind"] == "Decision"]
    assert decisions == [(1, "keep", True, ""), (2, "revert", False, "too risky"), (3, "keep", True, "")]
    verdicts = [d["verdict"] for d in journal(s) if d["kind"] == "EvalResult"]
    assert all(v["accepted"] and v["timing_available"] is False for v in verdicts)
    rows = [line.split("\t") for line in (s / "results.tsv").read_text().splitlines()]
    assert [row[4] for row in rows[1:]] == ["keep (override)", "revert", "keep (override)"]
    # The export writes the kept kernel, and it is the candidate of iteration 3.
    out = tmp_path / "best.py"
    assert warpsmith("sessions", "export", s.name, "-o", str(out), cwd=tmp_path).returncode == 0
    shown = subprocess.run(["git", "-C", str(s / "repo"), "show", "refs/kept/0003:kernel.py"],
                           capture_output=True, text=True, check=True).stdout
    assert out.read_text() == shown


@pytest.mark.slow
def test_kill_during_a_run_then_resume_loses_nothing(tmp_path):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "warpsmith", "run", "softmax", "--headless", "--auto",
                          "--iterations", "4"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 240
    session = None
    while time.time() < deadline:
        sessions = list((tmp_path / ".warpsmith" / "sessions").glob("*")) if (tmp_path / ".warpsmith").exists() else []
        if sessions and (sessions[0] / "journal.jsonl").exists():
            session = sessions[0]
            kinds = [r["kind"] for r in journal(session)]
            # Kill mid-iteration 2: after its candidate is committed, before its decision.
            if kinds.count("Decision") == 1 and kinds.count("CandidateProposed") == 2:
                break
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert session is not None
    before = journal(session)
    # Wherever the kill lands: a journalled proposal has its meta already (the tuner's config), so
    # resume never proposes it again and refuses it as a repeat, losing an iteration.
    for n, rec in enumerate(before):
        if rec["kind"] == "CandidateProposed":
            assert any(m["kind"] == "ProposalMeta" and m["iteration"] == rec["iteration"] for m in before[:n])
    r = warpsmith("sessions", "resume", session.name, "--headless", "--auto", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    after = journal(session)
    assert after[:len(before)] == before  # append-only: nothing rewritten
    decided = [d["iteration"] for d in after if d["kind"] == "Decision"]
    assert decided == [1, 2, 3, 4]  # each iteration decided exactly once
    proposed = [d["iteration"] for d in after if d["kind"] == "CandidateProposed"]
    assert proposed == [1, 2, 3, 4]  # the interrupted candidate was not proposed again
    configs = [json.dumps(d["meta"]["config"], sort_keys=True) for d in after if d["kind"] == "ProposalMeta"]
    assert len(set(configs)) == 4  # the tuner never re-tried a config across the restart
    assert len((session / "results.tsv").read_text().splitlines()) == 5

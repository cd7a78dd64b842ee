"""The README's main job, small: `warpsmith run softmax --headless --agent tuner --auto` in a fresh
folder (Triton interpreter), then a resume. The search moves across the task's variants, keeps its
Optuna studies in the session folder and continues them on resume without repeating a configuration,
and a verdict of the run is the one `warpsmith eval` gives the same file.

Not here: pruning on speed (the interpreter times nothing; test_tuner_search.py feeds timed verdicts).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def warpsmith(*args, cwd):
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "warpsmith", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=240, env=env)
    return proc


def same_verdict(v: dict) -> dict:
    """What must not differ between two evaluations of one file (timing is absent here)."""
    return {"accepted": v["accepted"], "stage": v["stage"],
            "reasons": sorted(r.get("rule", "") for r in v.get("reasons", [])),
            "shapes": [(s["name"], s["correct"], s.get("error")) for s in v.get("shapes", [])],
            "recommendation": (v.get("recommendation") or {}).get("action")}


@pytest.mark.slow
def test_tuner_run_searches_variants_resumes_its_study_and_agrees_with_eval(tmp_path, monkeypatch, capsys):
    run = warpsmith("run", "softmax", "--headless", "--agent", "tuner", "--iterations", "2", "--auto",
                    "--keep-buckets", "auto", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    [session] = (tmp_path / ".warpsmith" / "sessions").iterdir()
    assert "Searching 5 variants" in run.stdout and "rows.py" in run.stdout and "persistent.py" in run.stdout
    assert (session / "tuner" / "optuna.journal").is_file()

    # Asked for 20 more, it stops by itself: nothing is timed on a CPU, so after each variant's defaults
    # and a draw of the search there is nothing left to learn (the README's main job ends so).
    again = warpsmith("sessions", "resume", session.name, "--headless", "--iterations", "20", "--auto", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "the search needs a GPU to go further" in again.stdout
    records = [json.loads(line) for line in (session / "journal.jsonl").read_text().splitlines()]
    metas = [r["meta"] for r in records if r.get("kind") == "ProposalMeta"]
    assert len(metas) == 6
    # each variant's defaults first (the baseline, kernel.py, is the incumbent), then the search
    assert [m["variant"] for m in metas[:4]] == ["variants/rows.py", "variants/twopass.py", "variants/persistent.py",
                                                 "variants/split.py"]
    assert len({(m["variant"], tuple(sorted(m["config"].items()))) for m in metas}) == 6  # never twice
    assert "Optuna TPE" in again.stdout  # the later tries came from the study the first run left

    verdicts = {r["iteration"]: r["verdict"] for r in records if r.get("kind") == "EvalResult"}
    assert sorted(verdicts) == [1, 2, 3, 4, 5, 6]
    assert all(v["accepted"] for v in verdicts.values())  # every variant and draw is a correct kernel
    # Every verdict of the run is the one `warpsmith eval` gives: the first from a real `warpsmith eval`
    # process, the rest from the same command's main() in this process, in the same folder (a process
    # start is ~2.5 s of CPU of the ~7 s each; the evaluation itself still runs in its own sandboxed child).
    from harness.evaluate import prewarm
    from warpsmith.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(prewarm.POOL, "one_shot", prewarm.POOL.one_shot)  # (eval sets it; restored after)
    for it, verdict in verdicts.items():
        source = next(r["source"] for r in records if r.get("kind") == "CandidateProposed" and r["iteration"] == it)
        cand = tmp_path / f"candidate_{it:04d}.py"
        cand.write_text(source)
        if it == 1:
            ev = warpsmith("eval", "softmax", str(cand), "--json", cwd=tmp_path)
            rc, out, err = ev.returncode, ev.stdout, ev.stderr
        else:
            capsys.readouterr()
            rc = main(["eval", "softmax", str(cand), "--json"])
            out, err = capsys.readouterr()
        assert rc in (0, 1), err
        assert same_verdict(json.loads(out)) == same_verdict(verdict), it


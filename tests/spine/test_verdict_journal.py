"""A verdict journalled and read back (issue 39): the journal's verdict bytes are those the evaluator
handed over, and a journal written before verdicts crossed modules as `Verdict` records
(tests/fixtures/journal_v1/sample_run.jsonl, made by `sample_run` below at commit 15f7734) still loads
and replays to the state that code replayed it to (sample_run.state.json, made by `replay_state`
then): results.tsv, `sessions show`, the summary, the report, the history screen, the TUI's state
and bench pane, the headless printer, `eval`'s table and the loop's resume.

Regenerate both only for an intended change of what is shown, and read the diff:
    PYTHONPATH=. TRITON_INTERPRET=1 python tests/spine/test_verdict_journal.py
"""
from __future__ import annotations

import io
import json
import re
import socket
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from harness import events as ev
from harness.agents.script import ScriptAgent
from harness.decision import DecisionReply, DecisionRequest
from harness.sessions.history import SessionHistory
from harness.sessions.journal import results_rows
from harness.loop import Loop
from harness.sessions.session import Session, SessionMeta, sessions_root
from harness.sessions.workspace import Workspace

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "journal_v1"
JOURNAL = FIXTURES / "sample_run.jsonl"
STATE = FIXTURES / "sample_run.state.json"
SID = "20260301-000000-softmax-v39"
HOST = "vm"  # the host the fixture was made on
GIT_DATES = {"GIT_AUTHOR_DATE": "2026-03-01T00:00:00+0000", "GIT_COMMITTER_DATE": "2026-03-01T00:00:00+0000"}

BASELINE = '''"""Baseline (a stand-in: the evaluator is canned here)."""
import triton
import triton.language as tl

BLOCK = 1024


def softmax(x):
    return x
'''

# (file, description line, reasoning or None)
CANDIDATES = [
    ("01_block2048", "BLOCK 2048, 8 warps", "Wider blocks cut loop trips on long rows."),
    ("02_warps2", "BLOCK 1024, 2 warps", None),
    ("03_short_rows", "one row per warp for short rows", "Short rows waste lanes."),
    ("04_torch", "torch fallback", None),
    ("05_crash", "an out-of-bounds store", None),
    ("06_wrong", "skips the max subtraction", None),
    ("07_interp", "same kernel, checked in the interpreter", None),
    ("08_e2e", "fast alone, slower in the model", None),
    ("09_left", "left undecided by a stop", None),
]


def _shape(name, dims, *, long=False, protected=False, correct=True, error=None, cand=None, inc=None,
           speedup=None, roof=None, noise=None, winner=None) -> dict:
    return {"name": name, "dims": dims, "long": long, "protected": protected, "correct": correct, "error": error,
            "candidate_us": cand, "incumbent_us": inc, "speedup": speedup, "roofline_pct": roof,
            "candidate_graph_us": None if cand is None else round(cand * 0.97, 2),
            "incumbent_graph_us": None if inc is None else round(inc * 0.97, 2), "noise_pct": noise,
            **({"winner": winner} if winner else {})}


SHAPES = [("many short rows", {"rows": 65536, "cols": 512}, False),
          ("4k x 4k", {"rows": 4096, "cols": 4096}, False),
          ("vocab 32k", {"rows": 4096, "cols": 32768}, False),
          ("long rows 128k", {"rows": 1024, "cols": 131072}, True)]


def _timed(speedups: list[float], geomean: float, action: str, reason: str, can_keep: bool = True,
           **rec_extra) -> dict:
    shapes = []
    for i, ((name, dims, long), sp) in enumerate(zip(SHAPES, speedups)):
        inc = 100.0 + 25.0 * i
        shapes.append(_shape(name, dims, long=long, protected=long, cand=round(inc / sp, 3), inc=inc, speedup=sp,
                             roof=round(40 + 10 * i * sp, 1), noise=1.5 + 0.5 * i,
                             winner="candidate" if sp > 1.02 else "incumbent" if sp < 0.98 else "tie"))
    return {"accepted": True, "stage": "done", "reasons": [], "task": "softmax",
            "candidate": "/work/candidate.py", "incumbent": "/work/incumbent.py",
            "candidate_sha256": "ab" * 32, "device": "NVIDIA H200 (canned)", "timing_available": True,
            "shapes": shapes, "geomean_speedup": geomean, "noise_band_pct": 1.8,
            "recommendation": {"action": action, "reason": reason, "can_keep": can_keep, **rec_extra},
            "wall_s": 41.25, "violations": [], "notes": ["held-out: 2 shape(s) checked, correctness only, in 0.3 s"],
            "output": "", "sandbox": True, "call_timeout_s": 300.0,
            "heldout": [{"name": "held-out cols 836, rows 3", "dims": {"rows": 3, "cols": 836},
                         "why": "cols: inside the short bucket", "correct": True, "error": None},
                        {"name": "held-out cols 20133, rows 2", "dims": {"rows": 2, "cols": 20133},
                         "why": "cols: beyond every listed one (20000)", "correct": True, "error": None}],
            "hard_cases": [{"case": "huge values", "shape": "4k x 4k", "dims": {"rows": 2, "cols": 4096},
                            "correct": True, "error": None}],
            "contract": [{"case": "x as a transposed view", "correct": True}],
            "phases_s": {"spawn": 0.41, "correctness": 3.2, "timing": 37.6},
            "device_info": {"name": "NVIDIA H200", "copy_bw_Bps": 4.1e12}}


def verdicts() -> list[dict]:
    """What the (canned) evaluator hands over, one per candidate, in order."""
    out = [
        _timed([1.31, 1.12, 1.15, 1.16], 1.18, "keep", "geomean speedup 1.180x beyond the noise band (1.8%)"),
        _timed([0.99, 0.96, 0.97, 0.96], 0.97, "revert", "geomean speedup 0.970x: not faster"),
        _timed([1.4, 0.9, 0.85, 0.99], 0.96, "revert", "slower overall; wins the short bucket",
               buckets=["short"]),
        {"accepted": False, "stage": "static",
         "reasons": [{"rule": "static:no-torch-fallback", "message": "calls torch.softmax instead of a kernel"}],
         "task": "softmax", "device": "NVIDIA H200 (canned)", "timing_available": False, "shapes": [],
         "geomean_speedup": None, "noise_band_pct": None,
         "recommendation": {"action": "revert", "reason": "rejected: static:no-torch-fallback", "can_keep": False},
         "wall_s": 0.011, "violations": [{"rule": "no-torch-fallback", "message": "torch.softmax computes the answer",
                                         "line": 8, "col": 11, "snippet": "torch.softmax(x, -1)",
                                         "severity": "error"}],
         "notes": [], "output": "", "sandbox": True, "call_timeout_s": 300.0, "heldout": [], "hard_cases": []},
        # a lost worker's verdict: most keys missing, every reader takes the records' defaults
        {"accepted": False, "reasons": [{"rule": "crashed", "message": "the child died (signal 9)"}],
         "output": "Fatal Python error: Segmentation fault\n  File \"candidate.py\", line 7 in softmax\n"},
        {"accepted": False, "stage": "correctness",
         "reasons": [{"rule": "incorrect", "message": "many short rows: max abs error 0.41 > atol 0.01"}],
         "task": "softmax", "device": "NVIDIA H200 (canned)", "timing_available": False,
         "shapes": [_shape("many short rows", {"rows": 65536, "cols": 512}, correct=False,
                           error="max abs error 0.41 > atol 0.01 (row 3, col 17)"),
                    _shape("4k x 4k", {"rows": 4096, "cols": 4096}, correct=False,
                           error="not run: an earlier shape failed"),
                    _shape("long rows 128k", {"rows": 1024, "cols": 131072}, long=True, protected=True,
                           correct=False, error="not run: an earlier shape failed")],
         "geomean_speedup": None, "noise_band_pct": None,
         "recommendation": {"action": "revert", "reason": "incorrect on many short rows", "can_keep": False},
         "wall_s": 2.5, "violations": [], "notes": [], "output": "", "sandbox": True, "call_timeout_s": 300.0,
         "heldout": [], "hard_cases": []},
        {"accepted": True, "stage": "done", "reasons": [], "task": "softmax", "device": "cpu (Triton interpreter)",
         "timing_available": False,
         "shapes": [_shape("short rows", {"rows": 33, "cols": 96}), _shape("odd rows", {"rows": 7, "cols": 1000}),
                    _shape("long row", {"rows": 2, "cols": 20000}, long=True, protected=True)],
         "geomean_speedup": None, "noise_band_pct": None,
         "recommendation": {"action": "revert", "can_keep": True,
                            "reason": "correct, but no GPU here: timing is unavailable, so nothing is kept on speed"},
         "wall_s": 3.4, "violations": [], "notes": [], "output": "", "sandbox": False, "call_timeout_s": 300.0,
         "heldout": [], "hard_cases": [], "partial": []},
    ]
    e2e = _timed([1.3, 1.25, 1.2, 1.22], 1.24, "revert", "end-to-end: 0.97x slower in the model", can_keep=False)
    e2e.update(accepted=False, stage="e2e")
    e2e["reasons"] = [{"rule": "e2e-slower", "message": "the model step is 0.97x the incumbent's (µs per token)"}]
    e2e["e2e"] = {"workload": "decode step", "speedup": 0.97, "correct": True, "timing_available": True}
    out.append(e2e)
    out.append(_timed([1.06, 1.04, 1.05, 1.05], 1.05, "keep", "geomean speedup 1.050x beyond the noise band"))
    return out


class Interrupted(Exception):
    pass


class ScriptedDecider:
    """What a person answered at each question (the harness decides the unkeepable ones itself)."""

    REPLIES = {1: DecisionReply("keep", "human"),
               2: DecisionReply("revert", "human", reason="slower on the long rows; try fewer stages"),
               3: DecisionReply("revert", "auto", reason="kept for buckets short only, as recommended",
                                buckets=["short"]),
               7: DecisionReply("keep", "human", confirmed_override=True)}

    def __init__(self):
        self.asked: list[DecisionRequest] = []

    def decide(self, request: DecisionRequest) -> DecisionReply:
        self.asked.append(request)
        if request.iteration not in self.REPLIES:
            raise Interrupted(request.iteration)  # a stop with the question open: left undecided
        return self.REPLIES[request.iteration]


def make_session(base: Path) -> Session:
    root = sessions_root(base) / SID
    root.mkdir(parents=True)
    Workspace.create(root / "repo", BASELINE)
    session = Session(root, SessionMeta(SID, "softmax", "script:sample", 0.0, []))
    session.save_meta()
    return session


def script_dir(base: Path) -> Path:
    folder = base / "sample"
    folder.mkdir(parents=True, exist_ok=True)
    for i, (name, doc, reasoning) in enumerate(CANDIDATES, 1):
        src = BASELINE.replace("Baseline (a stand-in: the evaluator is canned here).", doc)
        src = src.replace("BLOCK = 1024", f"BLOCK = {1024 + 128 * i}")
        (folder / f"{name}.py").write_text(src)
        if reasoning:
            (folder / f"{name}.md").write_text(reasoning)
    return folder


def sample_run(base: Path, task) -> Session:
    """The loop over the script agent, canned verdicts and the scripted decider: keeps, a veto, a
    per-bucket keep, four candidates the harness reverts, an override and one left undecided."""
    session = make_session(base)
    canned = iter(verdicts())
    loop = Loop(session, task, ScriptAgent(script_dir(base)), ScriptedDecider(), lambda t, c, i: next(canned),
                max_iterations=len(CANDIDATES))
    loop.emit(ev.SessionStarted(session.id, task.name, "script:sample", [], "NVIDIA H200 (canned)", False, "manual"))
    with pytest.raises(Interrupted):
        loop.run()
    return session


def _plain(texts) -> list[str]:
    return [t.plain for t in texts]


def replay_state(session: Session, task) -> dict:
    """Everything a reader makes of the session's journal, as JSON."""
    from harness.decision import AutoDecider
    from harness.model.dispatch import bucket_results, dispatch_table
    from harness.evaluate.verdict import cannot_keep_reason, outcome_of, tally_outcome
    from harness.headless import Printer, shape_table
    from harness.sessions.report import build_report, collect, outcome_counts, shape_times
    from harness.sessions.session_view import candidate_rows
    from harness.sessions.summary import summary_lines
    from tui.screens.history import history_row, step_state
    from tui.state import RunState
    from tui.widgets.bench import legend_text, reason_lines, shape_rows, verdict_head, verdict_lines
    from warpsmith.commands.eval import print_table

    records = session.journal.read()
    h = SessionHistory.fold(records)
    events = h.events()
    out: dict = {"results_rows": results_rows(records), "candidate_rows": candidate_rows(records),
                 # (the summary's last lines are commands to run: they name this Python, not the journal)
                 "summary": [line for line in summary_lines(session) if not line.startswith(("  session folder",
                                                                                            "  export", "  report:",
                                                                                            "  resume:"))]}

    rep = build_report(session, task)
    steps = collect(session, h)
    out["report"] = {"summary": [list(kv) for kv in rep.summary if kv[0] != "created"], "kept": rep.kept,
                     "steps": rep.steps, "buckets": rep.buckets, "dispatch": rep.dispatch,
                     "shape_times": shape_times(steps), "outcomes": outcome_counts(steps)}
    out["history_screen"] = [list(history_row(s)) for s in steps]
    out["history_panes"] = [_plain([verdict_head(st), *verdict_lines(st)]) for st in (step_state(s, steps) for s in steps)]
    out["dispatch"] = [[r.bucket.name, r.label, r.kind, r.iteration, r.measurements] for r in dispatch_table(session, task)]

    state = RunState()
    for e in events:
        state.apply(e)
    out["tui"] = {"tally": dict(state.tally), "best_speedup": state.best_speedup, "best_history": state.best_history,
                  "untimed_keep": state.untimed_keep, "timed": state.timed, "verdict_iteration": state.verdict_iteration,
                  "turns": [[b.kind, b.level, b.text] for t in state.turns for b in t.blocks],
                  "bench": _plain([verdict_head(state), *verdict_lines(state)]),
                  "rows": [list(r) for r in shape_rows(state.verdict)], "legend": legend_text(state.verdict, None).plain,
                  "model_stats": {k: asdict(v) for k, v in state.model_stats.items()}}

    buf = io.StringIO()
    printer = Printer(buf, show_reasoning=False)
    for e in events:
        printer(e)
    out["headless"] = buf.getvalue().splitlines()

    per = []
    for e in events:
        if isinstance(e, ev.EvalResult):
            table = io.StringIO()
            print_table(e.verdict, table)
            per.append({"iteration": e.iteration, "eval_table": table.getvalue().splitlines(),
                        "shape_table": shape_table(e.verdict), "bench_reasons": reason_lines(e.verdict),
                        "rows": [list(r) for r in shape_rows(e.verdict)],
                        "cannot_keep": cannot_keep_reason(e.verdict), "outcome": outcome_of(e.verdict),
                        "tally": [tally_outcome(e.verdict, a) for a in ("keep", "revert")],
                        "buckets": [r.to_dict() for r in bucket_results(task, e.verdict)]})
    out["per_verdict"] = per

    loop = Loop(session, task, ScriptAgent(session.root), AutoDecider(), lambda t, c, i: {}, max_iterations=0)
    out["resume"] = {"history": [asdict(a) for a in loop.history],
                     "undecided": [[r["iteration"], (r["proposal"] or {}).get("commit"), r["verdict"] is not None]
                                 for r in loop.undecided]}
    return json.loads(json.dumps(out, default=str))


def _verdict_lines(journal: Path) -> list[str]:
    """The journal's EvalResult lines, without their time: the bytes of each verdict as written."""
    return [re.sub(r'^\{"t":[0-9.]+,', "{", line) for line in journal.read_text().splitlines()
            if '"kind":"EvalResult"' in line]


@pytest.fixture
def task():
    from harness.authoring.tasks import load_task

    return load_task("softmax")


@pytest.fixture
def fixed_git(monkeypatch):
    """The same commits (git dates) and the same worker name in each verdict (the local backend
    writes the host's name) on any machine."""
    for k, v in GIT_DATES.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(socket, "gethostname", lambda: HOST)


def test_the_verdicts_journalled_are_the_bytes_the_evaluator_handed_over(tmp_path, task, fixed_git):
    session = sample_run(tmp_path, task)
    written = _verdict_lines(session.journal.path)
    assert written == _verdict_lines(JOURNAL)  # byte for byte as journalled before verdicts were typed
    canned = verdicts()
    for line, v in zip(written, canned):
        rec = json.loads(line)
        # what the loop's backend and the loop add: where it ran, what it was measured against
        assert rec["verdict"] == {**v, "worker": {"backend": "local", "name": "local", "gpu": "-", "node": HOST,
                                                  "attempts": 1},
                                  "incumbent_commit": rec["verdict"]["incumbent_commit"]}
    assert len(written) == len(canned)


def test_a_journal_written_before_typed_verdicts_replays_to_the_same_state(tmp_path, task, fixed_git):
    session = sample_run(tmp_path, task)  # the same commits (fixed dates), so git has what the old journal names
    session.journal.path.write_bytes(JOURNAL.read_bytes())
    assert replay_state(session, task) == json.loads(STATE.read_text())


def test_the_sample_run_replays_to_that_state_too(tmp_path, task, fixed_git):
    session = sample_run(tmp_path, task)
    assert replay_state(session, task) == json.loads(STATE.read_text())


def test_an_old_journals_reasons_and_violations_read_as_records():
    from harness.evaluate.records import Finding, Reason

    records = [json.loads(line) for line in JOURNAL.read_text().splitlines()[1:]]
    events = SessionHistory.fold(records).events()
    verdicts = [e.verdict for e in events if isinstance(e, ev.EvalResult)]
    reasons = [r for v in verdicts for r in v.reasons]
    assert len(reasons) == 4 and all(isinstance(r, Reason) for r in reasons)
    assert reasons[0].rule == "static:no-torch-fallback" and reasons[0].message == "calls torch.softmax instead of a kernel"
    (found,) = [f for v in verdicts for f in v.violations]
    assert isinstance(found, Finding) and (found.rule, found.line, found.col) == ("no-torch-fallback", 8, 11)
    static = [e for e in events if isinstance(e, ev.StaticResult) and e.violations]
    assert [type(f) for e in static for f in e.violations] == [Finding]
    # and written back, their lines are the journal's, byte for byte
    old = [r for r in records if r.get("kind") in ("EvalResult", "StaticResult")]
    again = [{"t": r["t"], **e.to_dict()} for r, e in
             zip(old, [e for e in events if isinstance(e, (ev.EvalResult, ev.StaticResult))], strict=True)]
    assert len(old) == 18 and [json.dumps(r) for r in again] == [json.dumps(r) for r in old]


if __name__ == "__main__":  # regenerate the fixture (see the module's doc)
    import os
    import tempfile

    from harness.authoring.tasks import load_task

    os.environ.update(GIT_DATES)
    socket.gethostname = lambda: HOST
    with tempfile.TemporaryDirectory() as tmp:
        s = sample_run(Path(tmp), load_task("softmax"))
        FIXTURES.mkdir(parents=True, exist_ok=True)
        JOURNAL.write_bytes(s.journal.path.read_bytes())
        STATE.write_text(json.dumps(replay_state(s, load_task("softmax")), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {JOURNAL} and {STATE}", file=sys.stderr)

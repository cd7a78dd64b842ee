"""One fold of the journal (harness/sessions/history.py) read the same by resume, results.tsv, `sessions show`,
the summary and the report; journals written before the fold still load (tests/fixtures/journal_v0)."""
from __future__ import annotations

import json
from pathlib import Path

from harness import events as ev
from harness.sessions.history import SessionHistory
from harness.sessions.journal import RESULTS_HEADER, results_rows
from harness.sessions.session_view import candidate_rows
from harness.sessions.summary import _best_lines

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "journal_v0"


def records(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / name).read_text().splitlines() if line.strip()]


def test_a_journal_with_keeps_folds_into_its_steps():
    h = SessionHistory.fold(records("loop_keeps.jsonl"))
    assert h.started == 4
    assert [(s.iteration, s.action, s.decision["by"]) for s in h.decided] == [
        (1, "revert", "human"), (2, "keep", "auto"), (3, "revert", "auto")]
    assert [(r["iteration"], r["buckets"]) for r in h.bucket_keeps] == [(1, ["short", "mid"])]
    assert h.steps[1].bucket_keep is h.bucket_keeps[0]
    assert h.last_keep["iteration"] == 2 and h.last_keep["commit"] == h.steps[2].commit
    # iteration 4 was proposed, never evaluated or decided: resume asks about it again
    (left,) = h.undecided()
    assert left.iteration == 4 and left.verdict is None and left.meta == {"script_file": "04_v.py"}
    assert h.session_started == {}  # (a bare Loop: the run command writes SessionStarted)


def test_old_journals_read_the_same_everywhere():
    recs = records("cpu_run.jsonl")
    assert SessionHistory.fold(recs).session_started["task"] == "softmax"
    tsv = [dict(zip(RESULTS_HEADER, line.split("\t")))
           for line in (FIXTURES / "cpu_run.results.tsv").read_text().splitlines()[1:]]
    assert results_rows(recs) == tsv
    assert [(r["iteration"], r["verdict"], r["decision"], r["by"]) for r in candidate_rows(recs)] == [
        ("1", "rejected (static: static:python-syntax)", "revert", "harness"),
        ("2", "accepted", "revert", "auto")]
    assert _best_lines(recs) == ["  best: the baseline (nothing kept); timing unavailable (no GPU: nothing "
                                 "is kept on speed)"]
    shown = candidate_rows(records("loop_keeps.jsonl"))
    assert [(r["iteration"], r["decision"], r["geomean"]) for r in shown] == [
        ("1", "kept for short, mid", "1.149x"), ("2", "keep", "1.058x"), ("3", "revert", "0.925x"),
        ("4", "undecided", "")]


def test_every_record_that_is_an_event_comes_back_as_one():
    recs = records("loop_keeps.jsonl")
    events = SessionHistory.fold(recs).events()
    assert [type(e).__name__ for e in events] == [r["kind"] for r in recs if r.get("kind") in ev.EVENT_TYPES]
    assert any(isinstance(e, ev.BucketKeep) for e in events)


def test_a_decision_is_read_with_the_verdict_known_when_it_was_written():
    recs = [{"kind": "IterationStarted", "iteration": 1},
            {"kind": "CandidateProposed", "iteration": 1, "commit": "a" * 40, "description": "first"},
            {"kind": "EvalResult", "iteration": 1, "verdict": {"accepted": True, "geomean_speedup": 1.5}},
            {"kind": "Decision", "iteration": 1, "action": "keep", "commit": "a" * 40},
            {"kind": "EvalResult", "iteration": 1, "verdict": {"accepted": False, "stage": "timing"}}]
    h = SessionHistory.fold(recs)
    assert h.decided[0].verdict.to_json() == {"accepted": True, "geomean_speedup": 1.5}
    assert h.steps[1].verdict.to_json() == {"accepted": False, "stage": "timing"}
    assert results_rows(recs)[0]["geomean_speedup"] == "1.5000"


def test_journal_events_round_trip_through_their_typed_records():
    for r in records("loop_keeps.jsonl"):
        if r.get("kind") in ev.EVENT_TYPES:
            e = ev.Event.from_json(r)
            assert e.to_json() == {k: v for k, v in r.items() if k != "t"}


def test_every_record_of_an_old_journal_is_a_typed_record_written_back_as_it_was():
    seen = set()
    for name in ("cpu_run.jsonl", "loop_keeps.jsonl"):
        for r in records(name):
            kind, line = r["kind"], {k: v for k, v in r.items() if k != "t"}
            seen.add(kind)
            if kind in ev.RECORD_TYPES:  # not events: written kind first, as they always were
                rec = ev.JournalRecord.from_json(r)
                assert json.dumps(rec.to_json()) == json.dumps(line)
            else:
                assert ev.Event.from_json(r).to_json() == line
    assert {"PacksSelected", "PromptPacks", "ProposalMeta", "SessionStarted", "EvalResult", "Decision",
            "BucketKeep"} <= seen
    assert ev.DecisionMode("auto").to_json() == {"kind": "DecisionMode", "mode": "auto"}


def test_a_verdict_without_a_key_reads_with_the_records_one_default_everywhere():
    # A verdict with no stage, no timing_available and no recommendation (a journal of another
    # version, a lost worker): every reader takes Verdict's defaults, so they say the same thing.
    import io

    from warpsmith.commands.eval import print_table
    from harness.evaluate.records import Verdict
    from harness.headless import Printer
    from harness.sessions.report import Step
    from tui.screens.history import verdict_word
    from tui.state import RunState
    from tui.widgets.bench import verdict_head, verdict_lines

    v = {"accepted": False, "reasons": [{"rule": "crashed", "message": "the child died"}]}
    recs = [{"kind": "IterationStarted", "iteration": 1},
            {"kind": "CandidateProposed", "iteration": 1, "commit": "c" * 40, "description": "d"},
            {"kind": "EvalResult", "iteration": 1, "verdict": v},
            {"kind": "Decision", "iteration": 1, "action": "revert", "by": "auto", "commit": "c" * 40}]
    assert results_rows(recs)[0]["verdict"] == "rejected:?"
    assert results_rows(recs)[0]["outcome"] == "crashed"
    assert candidate_rows(recs)[0]["verdict"] == "rejected (?: crashed)"
    assert verdict_word(Verdict.from_json(v)) == "rejected at ?: crashed"
    assert Step(1, verdict=Verdict.from_json(v)).outcome == "crashed"

    out = io.StringIO()
    Printer(out, show_reasoning=False)(ev.EvalResult(1, Verdict.from_json(v)))
    assert "[1] verdict: rejected at ?, not timed" in out.getvalue()
    buf = io.StringIO()
    print_table(Verdict.from_json(v), buf)
    assert buf.getvalue().startswith(": REJECTED at ?  (, 0.0 s)") and "recommendation: revert\n" in buf.getvalue()

    state = RunState()
    state.apply(ev.EvalResult(1, Verdict.from_json(v)))
    assert "rejected at ?: **crashed**" in state.turns[-1].blocks[-1].text
    assert "rejected at ?" in verdict_head(state).plain and not state.timed
    assert "timing unavailable (interpreter)" in [t.plain for t in verdict_lines(state)]


def test_the_pack_selection_a_resume_takes_up_is_the_last_journalled():
    assert SessionHistory.fold(records("cpu_run.jsonl")).packs_selected == [
        "reward-hacks", "cuda-graphs", "long-context", "dsl-triton", "h200"]
    assert SessionHistory.fold(records("loop_keeps.jsonl")).packs_selected is None  # none journalled
    recs = [{"kind": "PacksSelected", "packs": ["a"]}, {"kind": "PacksSelected", "packs": ["b", "c"]}]
    assert SessionHistory.fold(recs).packs_selected == ["b", "c"]

"""One fold of the journal (harness/history.py) read the same by resume, results.tsv, `sessions show`,
the summary and the report; journals written before the fold still load (tests/fixtures/journal_v0)."""
from __future__ import annotations

import json
from pathlib import Path

from harness import events as ev
from harness.history import SessionHistory
from harness.journal import RESULTS_HEADER, results_rows
from harness.session_view import candidate_rows
from harness.summary import _best_lines

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
    assert h.decided[0].verdict == {"accepted": True, "geomean_speedup": 1.5}
    assert h.steps[1].verdict == {"accepted": False, "stage": "timing"}
    assert results_rows(recs)[0]["geomean_speedup"] == "1.5000"


def test_journal_events_round_trip_through_their_typed_records():
    for r in records("loop_keeps.jsonl"):
        if r.get("kind") in ev.EVENT_TYPES:
            e = ev.Event.from_json(r)
            assert e.to_json() == {k: v for k, v in r.items() if k != "t"}

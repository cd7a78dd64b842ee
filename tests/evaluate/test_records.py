"""The typed verdict (harness/evaluate/records.py) reads a verdict and writes it back byte for byte:
`warpsmith eval --json` goes through it and its consumers see the same JSON as before."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.evaluate.records import Recommendation, ShapeResult, Verdict

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "journal_v0"


def journal_verdicts() -> list[dict]:
    out = []
    for f in sorted(FIXTURES.glob("*.jsonl")):
        out += [r["verdict"] for r in map(json.loads, f.read_text().splitlines()) if r.get("kind") == "EvalResult"]
    return out


def test_verdicts_from_journals_round_trip_byte_for_byte():
    verdicts = journal_verdicts()
    assert len(verdicts) == 5
    for v in verdicts:
        typed = Verdict.from_json(v)
        assert json.dumps(typed.to_json(), indent=1) == json.dumps(v, indent=1)
        assert typed.accepted == v["accepted"] and typed.geomean_speedup == v.get("geomean_speedup")
        assert all(isinstance(s, ShapeResult) for s in typed.shapes)
        assert isinstance(typed.recommendation, Recommendation)
        assert typed.recommendation.can_keep == v["recommendation"]["can_keep"]


def test_keys_it_does_not_name_travel_and_new_ones_come_last():
    v = {"accepted": True, "phases_s": {"spawn": 1.0}, "stage": "done", "e2e": {"speedup": 1.1}}
    typed = Verdict.from_json(v)
    assert typed.extra == {"phases_s": {"spawn": 1.0}, "e2e": {"speedup": 1.1}}
    typed.extra["partial"] = ["long row"]
    assert list(typed.to_json()) == ["accepted", "phases_s", "stage", "e2e", "partial"]
    assert Recommendation(action="keep", reason="faster", can_keep=True).to_json() == {
        "action": "keep", "reason": "faster", "can_keep": True}


def test_eval_json_is_the_verdict_object(tmp_path):
    cand = ROOT / "kernels" / "softmax" / "candidates" / "onepass.py"
    r = subprocess.run([sys.executable, "-m", "warpsmith", "eval", "softmax", str(cand), "--json", "--seed", "7"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    v = json.loads(r.stdout)
    assert v["accepted"] is True and v["task"] == "softmax"
    # what a consumer parses and re-dumps is what the command printed
    assert json.dumps(v, indent=1) + "\n" == r.stdout
    assert json.dumps(Verdict.from_json(v).to_json(), indent=1) + "\n" == r.stdout


def test_held_out_shapes_and_winners_read_typed_and_write_back_unchanged():
    v = {"accepted": True, "stage": "done", "timing_available": True,
         "shapes": [{"name": "a", "dims": {"cols": 64}, "speedup": 1.3, "noise_pct": 2.0, "winner": "candidate"}],
         "heldout": [{"name": "h", "dims": {"cols": 77}, "why": "odd", "correct": True, "error": None}]}
    typed = Verdict.from_json(v)
    assert typed.shapes[0].winner == "candidate"
    (h,) = typed.heldout
    assert isinstance(h, ShapeResult) and h.dims == {"cols": 77} and h.correct and h.extra == {"why": "odd"}
    assert json.dumps(typed.to_json()) == json.dumps(v)


def test_a_missing_key_gets_one_default():
    typed = Verdict.from_json({"accepted": False})
    assert (typed.stage, typed.stage_shown, typed.timing_available, typed.shapes, typed.recommendation) == (
        "", "?", False, [], None)
    assert ShapeResult.from_json({}).winner is None and Verdict.from_json({"stage": "timing"}).stage_shown == "timing"
    assert typed.to_json() == {"accepted": False}  # defaults are read, never written


def test_what_readers_derive_from_a_verdict_are_its_properties():
    from harness.evaluate.verdict import cannot_keep_reason, outcome_of, tally_outcome

    static = {"accepted": False, "stage": "static",
              "reasons": [{"rule": "static:no-torch-fallback", "message": "m"}, {"rule": "no-torch-fallback"}],
              "violations": [{"rule": "no-torch-fallback", "line": 8, "severity": "error"}]}
    crashed = {"accepted": False, "reasons": [{"rule": "timeout", "message": "hung"}]}
    bucketed = {"accepted": True, "stage": "done", "incumbent_commit": "abc",
                "recommendation": {"action": "revert", "reason": "r", "can_keep": True, "buckets": ["short"]}}
    partial = {"accepted": True, "partial": ["long row"]}
    for raw, outcome, revert, why in [
            (static, "rejected-static", "rejected", "rejected at the static check (no-torch-fallback, line 8)"),
            (crashed, "crashed", "crashed", "rejected at an unknown stage (timeout)"),
            (bucketed, "accepted", "reverted", "rejected at done"),
            (partial, "accepted", "reverted", "not every shape was run (skipped: long row)")]:
        v = Verdict.from_json(raw)
        assert (v.outcome, v.tally("revert"), v.tally("keep"), v.cannot_keep_reason) == (outcome, revert, "kept", why)
        # the evaluator's functions say the same of the wire form
        assert (outcome_of(raw), tally_outcome(raw, "revert"), cannot_keep_reason(raw)) == (outcome, revert, why)
    v = Verdict.from_json(bucketed)
    assert v.keep_buckets == ["short"] and v.can_keep and v.incumbent_commit == "abc" and v.recommended.action == "revert"
    assert Verdict.from_json(crashed).keep_buckets == [] and not Verdict.from_json(crashed).can_keep
    odd = Verdict.from_json({"recommendation": "keep"})  # not a record: none, and written back as it was
    assert odd.recommended is None and odd.to_json() == {"recommendation": "keep"}


def test_a_verdict_says_the_keys_it_was_read_with():
    v = Verdict.from_json({"accepted": True, "shapes": [{"name": "a", "speedup": 1.2, "why": "edge"}]})
    assert v.said("accepted") and not v.said("timing_available")
    assert v.shape_dicts == [{"name": "a", "speedup": 1.2, "why": "edge"}]
    assert not Verdict.empty().said("timing_available") and Verdict.empty().to_json() == {}
    assert Verdict().said("timing_available")  # built in code: every field is said


def test_reasons_and_violations_read_as_records_and_write_back_unchanged():
    from harness.evaluate.records import Finding, Reason

    v = {"accepted": False, "stage": "static",
         "reasons": [{"rule": "static:no-torch-fallback", "message": "calls torch.softmax (line 8)"},
                     {"message": "no rule", "rule": "odd", "hint": "kept"}, "not an object"],
         "violations": [{"rule": "no-torch-fallback", "message": "torch.softmax computes the answer", "line": 8,
                         "col": 11, "snippet": "torch.softmax(x, -1)", "severity": "error"},
                        {"rule": "no-sleep", "message": "m", "line": None, "severity": "warning", "fix": "drop it"}]}
    typed = Verdict.from_json(v)
    assert json.dumps(typed.to_json()) == json.dumps(v)  # keys, their order and unknown keys as read
    r0, r1, r2 = typed.reasons
    assert isinstance(r0, Reason) and (r0.rule, r0.message) == ("static:no-torch-fallback", "calls torch.softmax (line 8)")
    assert isinstance(r1, Reason) and r1.extra == {"hint": "kept"} and r2 == "not an object"  # left as it was
    f0, f1 = typed.violations
    assert all(isinstance(f, Finding) for f in typed.violations)
    assert (f0.line, f0.col, f0.snippet, f0.is_error) == (8, 11, "torch.softmax(x, -1)", True)
    assert (f1.line, f1.col, f1.snippet, f1.is_error, f1.extra) == (None, None, "", False, {"fix": "drop it"})
    assert typed.rules == ["static:no-torch-fallback", "odd"]
    assert typed.cannot_keep_reason == "rejected at the static check (no-torch-fallback, line 8; odd)"
    # a key a reason or a finding lacks gets one default, and is not written back
    assert Finding.from_json({"rule": "r"}).severity == "error" and Finding.from_json({"rule": "r"}).to_json() == {"rule": "r"}
    assert Reason.from_json({}).rule == "" and Reason.from_json({}).to_json() == {}


def test_a_static_result_carries_findings_and_journals_the_same_line():
    from harness import events as ev
    from harness.evaluate.records import Finding

    line = {"iteration": 4, "ok": False, "violations": [{"rule": "no-torch-fallback", "message": "m", "line": 8,
                                                         "col": 11, "snippet": "s", "severity": "error", "x": 1}],
            "kind": "StaticResult"}
    e = ev.from_dict(line)
    assert isinstance(e, ev.StaticResult) and isinstance(e.violations[0], Finding) and e.violations[0].line == 8
    assert json.dumps(e.to_dict()) == json.dumps(line)
    typed = Verdict.from_json({"violations": line["violations"]})
    assert json.dumps(ev.StaticResult(4, False, typed.violations).to_dict()) == json.dumps(line)  # as the loop emits it

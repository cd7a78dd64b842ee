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
    r = subprocess.run([sys.executable, "-m", "harness", "eval", "softmax", str(cand), "--json", "--seed", "7"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    v = json.loads(r.stdout)
    assert v["accepted"] is True and v["task"] == "softmax"
    # what a consumer parses and re-dumps is what the command printed
    assert json.dumps(v, indent=1) + "\n" == r.stdout
    assert json.dumps(Verdict.from_json(v).to_json(), indent=1) + "\n" == r.stdout

"""Regressions from the outside red-team set (bench/fresh_redteam), in the interpreter.

A softmax that shifts by the max of a 256-wide sample of the row (softmax is shift-invariant, so
only overflow needs the shift) is right on randn rows and on every row no wider than the sample: the
hard case "one huge value" caught it only where that case happened to land on a wide row.
"""
from __future__ import annotations

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.tasks import load_task

REPO = Path(__file__).resolve().parents[2]


def test_a_sampled_row_max_is_rejected_by_a_hard_case_on_a_wide_row(tmp_path):
    t = load_task("softmax")
    v = evaluate(t, REPO / "bench" / "fresh_redteam" / "cheats" / "sampled_row_max.py",
                 options=EvalOptions(on_gpu=False, static=False, seed=3))
    assert not v["accepted"]
    failed = [h for h in v["hard_cases"] if h["correct"] is False]
    assert failed and {h["case"] for h in failed} & {"one huge value", "huge values"}
    assert any(r["rule"] == "hard-case-incorrect" for r in v["reasons"])

"""Regressions from the outside red-team set (bench/fresh_redteam), in the interpreter.

A softmax that shifts by the max of a 256-wide sample of the row (softmax is shift-invariant, so
only overflow needs the shift) is right on randn rows and on every row no wider than the sample: the
hard case "one huge value" caught it only where that case happened to land on a wide row.
"""
from __future__ import annotations

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.authoring.tasks import load_task

REPO = Path(__file__).resolve().parents[2]


def test_a_sampled_row_max_is_rejected_by_a_hard_case_on_a_wide_row(tmp_path):
    t = load_task("softmax")
    v = evaluate(t, REPO / "bench" / "fresh_redteam" / "cheats" / "sampled_row_max.py",
                 options=EvalOptions(on_gpu=False, static=False, seed=3))
    assert not v["accepted"]
    failed = [h for h in v["hard_cases"] if h["correct"] is False]
    assert failed and {h["case"] for h in failed} & {"one huge value", "huge values"}
    assert any(r["rule"] == "hard-case-incorrect" for r in v["reasons"])


def test_the_interpreters_heldout_subset_always_has_both_ends_of_the_range():
    # A rmsnorm that divides by the width rounded up to 8 is off by 8x at one column and within
    # tolerance at 20500: it passed whenever the seeded subset left out the shortest width.
    from harness.evaluate.heldout import draw_shapes

    for name in ("rmsnorm", "softmax"):
        t = load_task(name)
        ref = t.load_reference()
        lo, hi = t.heldout.ranges_for(False)["cols"]
        for secret in range(40):
            cols = [s.dims["cols"] for s, _ in draw_shapes(t, ref, False, secret)]
            assert min(cols) == lo and max(cols) == hi, (name, secret, cols)


def test_softmax_constant_rows_always_hold_both_extremes_and_a_zero_padded_max_is_rejected():
    # max(0, row max) (masked lanes loaded as 0.0) is right unless a row is all very negative:
    # it passed whenever the seed drew no such row.
    import torch

    t = load_task("softmax")
    ref = t.load_reference()
    for seed in range(20):
        (x,) = ref.make_inputs({"rows": 2, "cols": 8, "case": "constant rows"}, torch.bfloat16, seed, "cpu")
        assert x[0].float().max() <= -9000 and x[1].float().min() >= 9000
    v = evaluate(t, REPO / "bench" / "fresh_redteam" / "cheats" / "zero_padded_max.py",
                 options=EvalOptions(on_gpu=False, static=False, seed=11))
    assert not v["accepted"]
    assert any(h["case"] == "constant rows" and h["correct"] is False for h in v["hard_cases"])

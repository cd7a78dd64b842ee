"""Issue 19, "every DSV4 task runs and can keep": each DeepSeek V4 baseline through the whole
evaluator in Triton's interpreter, as `warpsmith eval TASK kernels/TASK/kernel.py` runs it (the
static check with the task's rules, the sandboxed child, correctness on every interpreter shape,
held-out shapes and hard inputs, the runtime guards). Accepted with nothing left to refuse: on a
GPU only the timing would remain to decide. The timing path itself is in
tests/evaluate/test_aa_bench.py (the incumbent against itself, never rejected)."""
from __future__ import annotations

import pytest

from harness.evaluate.runner import EvalOptions, evaluate
from harness.authoring.tasks import load_task

TASKS = ["dsv4_indexer_topk", "dsv4_csa_decode", "dsv4_hca_decode", "dsv4_compress", "dsv4_csa_decode_fp8"]
# The interpreter evaluates both sides of tl.where: exp(-inf - -inf) warns in numpy, is discarded.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@pytest.mark.parametrize("name", TASKS)
def test_the_baseline_passes_every_check_before_timing(name):
    task = load_task(name)
    v = evaluate(task, task.baseline_path, options=EvalOptions(on_gpu=False))
    assert v["accepted"] and v["stage"] == "done", v["reasons"]
    assert v["violations"] == []
    assert [s["name"] for s in v["shapes"]] == [s.name for s in task.interpreter_shapes]
    assert all(s["correct"] for s in v["shapes"])
    assert v["heldout"] and all(h["correct"] for h in v["heldout"]), v["heldout"]
    assert v["hard_cases"] and all(h["correct"] for h in v["hard_cases"]), v["hard_cases"]
    rec = v["recommendation"]
    assert rec["action"] == "revert" and rec["can_keep"] and "no GPU here" in rec["reason"]

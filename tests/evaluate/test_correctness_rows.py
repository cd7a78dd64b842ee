"""The correctness stage's fresh-inputs, ghost and graph-replay calls compare 64 rows of a large
output (drawn from a secret seed), the poison pair the whole output: about half the stage's
transfers on the H200's shapes, and a stale or kernel-independent output is still caught."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, correctness, evaluate
from harness.evaluate.channel import SAMPLE_ROWS
from harness.evaluate.process import ChildProcess
from harness.authoring.tasks import load_task

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "redteam" / "candidates"


@pytest.fixture
def tall_task(tmp_path, monkeypatch):
    """softmax with a 200-row interpreter shape whose outputs count as large (threshold lowered), and
    the row counts of every output the parent receives from a correctness call, by call kind."""
    d = tmp_path / "softmax"
    shutil.copytree(REPO / "kernels" / "softmax", d, ignore=shutil.ignore_patterns("__pycache__"))
    toml = (d / "task.toml").read_text().replace("dims = { rows = 33, cols = 96 }", "dims = { rows = 200, cols = 96 }")
    (d / "task.toml").write_text(toml)
    monkeypatch.setattr(correctness, "SAMPLE_MIN", 1)
    received: list[tuple[str, int]] = []
    real = ChildProcess.request

    def spy(self, req, timeout):
        reply, tensors = real(self, req, timeout)
        if req and req.get("op") == "call" and req.get("dims", {}).get("rows") == 200 and tensors:
            kind = "ghost" if req.get("ghost") else "sampled" if req.get("rows_seed") is not None else "whole"
            received.append((kind, tensors[0].shape[0]))
        return reply, tensors

    monkeypatch.setattr(ChildProcess, "request", spy)
    return load_task(d), received


def _eval(task, path, static=True):
    return evaluate(task, path, options=EvalOptions(on_gpu=False, time=False, static=static,
                                                    shapes=["short rows"]))


def test_an_honest_kernel_passes_with_whole_poison_outputs_and_sampled_rows_for_the_rest(tall_task):
    task, received = tall_task
    v = _eval(task, task.baseline_path)
    assert v["accepted"], v["reasons"]
    kinds = dict.fromkeys(k for k, _ in received)
    assert set(kinds) == {"whole", "sampled", "ghost"}
    assert all(n == 200 for k, n in received if k == "whole")      # the poison pair (and held-out calls)
    assert all(n == SAMPLE_ROWS for k, n in received if k != "whole")  # fresh inputs, ghost replay


def test_a_result_cached_by_shape_is_still_stale_in_the_sampled_rows(tall_task):
    task, _ = tall_task
    v = _eval(task, CANDIDATES / "shape_cache.py", static=False)
    assert not v["accepted"]
    assert any(r["rule"] == "incorrect" and "fresh inputs" in r["message"] for r in v["reasons"]), v["reasons"]


def test_a_torch_result_behind_a_decoy_launch_is_still_caught_by_the_sampled_ghost_replay(tall_task):
    task, _ = tall_task
    v = _eval(task, CANDIDATES / "decoy_kernel.py", static=False)
    assert any(r["rule"] == "dsl-kernel-runs" for r in v["reasons"]), v["reasons"]

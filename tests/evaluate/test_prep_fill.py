"""A timed batch's inputs are refilled in place (harness/evaluate/child.py _refill) by a task's
fill_inputs where it has one: the parent rebuilds the checked call's inputs with make_inputs from the
same seed, so the two must agree bit for bit, and every seed must give values of its own."""
from __future__ import annotations

import pytest
import torch

from harness.tasks import load_task

FILLED = ["softmax", "rmsnorm", "rmsnorm_cute"]


@pytest.mark.parametrize("name", FILLED)
def test_fill_writes_exactly_what_make_inputs_makes_for_that_seed(name):
    task = load_task(name)
    ref = task.load_reference()
    dt = getattr(torch, task.dtypes[0])
    for shape in task.interpreter_shapes:
        xs = list(ref.make_inputs(shape.dims, dt, 1, "cpu"))
        ptrs = [x.data_ptr() for x in xs]
        for seed in (2, 3):
            assert ref.fill_inputs(xs, shape.dims, seed) is True
            want = ref.make_inputs(shape.dims, dt, seed, "cpu")
            assert [x.data_ptr() for x in xs] == ptrs  # in place: the graph's buffers stay where they were
            assert all(torch.equal(a, b) and a.dtype == b.dtype and a.shape == b.shape for a, b in zip(xs, want))
        # Fresh values per seed: no two seeds share a tensor's values.
        again = ref.make_inputs(shape.dims, dt, 2, "cpu")
        assert not any(torch.equal(a, b) for a, b in zip(xs, again))


@pytest.mark.parametrize("name", FILLED)
def test_a_hard_case_is_not_filled_and_is_made_as_before(name):
    task = load_task(name)
    ref = task.load_reference()
    dt = getattr(torch, task.dtypes[0])
    dims = {**task.interpreter_shapes[0].dims, "case": next(iter(ref.HARD_CASES))}
    xs = list(ref.make_inputs(dims, dt, 1, "cpu"))
    before = [x.clone() for x in xs]
    assert ref.fill_inputs(xs, dims, 2) is False
    assert all(torch.equal(a, b) for a, b in zip(xs, before))  # untouched: the harness makes and copies


def test_the_plain_inputs_keep_their_scale():
    """softmax: N(0, 4) rows (a few dominant entries, so the max shift matters); rmsnorm: N(0, 2) rows
    and weights in [0.5, 1.5) (away from 1, so forgetting them fails)."""
    ref = load_task("softmax").load_reference()
    (x,) = ref.make_inputs({"rows": 64, "cols": 4096}, torch.bfloat16, 5, "cpu")
    assert x.dtype == torch.bfloat16 and 3.8 < x.float().std().item() < 4.2
    ref = load_task("rmsnorm").load_reference()
    x, w = ref.make_inputs({"rows": 64, "cols": 4096}, torch.bfloat16, 5, "cpu")
    assert 1.9 < x.float().std().item() < 2.1 and 0.5 <= w.float().min().item() and w.float().max().item() <= 1.5

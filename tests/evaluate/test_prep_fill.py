"""A timed batch's inputs are refilled in place (harness/evaluate/child.py _refill) by a task's
fill_inputs where it has one: the parent rebuilds the checked call's inputs with make_inputs from the
same seed, so the two must agree bit for bit, and every seed must give values of its own."""
from __future__ import annotations

import pytest
import torch

from harness.tasks import load_task

FILLED = ["softmax", "rmsnorm", "rmsnorm_cute", "dsv4_csa_decode", "dsv4_csa_decode_fp8", "dsv4_hca_decode",
          "dsv4_indexer_topk", "dsv4_compress"]


@pytest.mark.parametrize("name", FILLED)
def test_fill_writes_exactly_what_make_inputs_makes_for_that_seed(name):
    task = load_task(name)
    ref = task.load_reference()
    dt = getattr(torch, task.dtypes[0])
    for shape in task.interpreter_shapes:
        xs = list(ref.make_inputs(shape.dims, dt, 1, "cpu"))
        ptrs = [x.data_ptr() for x in xs if isinstance(x, torch.Tensor)]
        for seed in (2, 3):
            assert ref.fill_inputs(xs, shape.dims, seed) is True
            want = ref.make_inputs(shape.dims, dt, seed, "cpu")
            assert [x.data_ptr() for x in xs if isinstance(x, torch.Tensor)] == ptrs  # in place: the graph's buffers stay where they were
            assert all(torch.equal(a, b) and a.dtype == b.dtype and a.shape == b.shape if isinstance(a, torch.Tensor)
                   else a == b for a, b in zip(xs, want))
        # Fresh values per seed: the first input and the largest differ between two seeds (csa decode's
        # lengths are a fixed multiset in a seed's order, so a small batch may repeat them).
        again = ref.make_inputs(shape.dims, dt, 2, "cpu")
        big = max((i for i, x in enumerate(xs) if isinstance(x, torch.Tensor)), key=lambda i: xs[i].numel())
        assert not torch.equal(xs[0], again[0]) and not torch.equal(xs[big], again[big])


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "rmsnorm_cute"])
def test_a_hard_case_is_not_filled_and_is_made_as_before(name):
    task = load_task(name)
    ref = task.load_reference()
    dt = getattr(torch, task.dtypes[0])
    dims = {**task.interpreter_shapes[0].dims, "case": next(iter(ref.HARD_CASES))}
    xs = list(ref.make_inputs(dims, dt, 1, "cpu"))
    before = [x.clone() for x in xs]
    assert ref.fill_inputs(xs, dims, 2) is False
    assert all(torch.equal(a, b) for a, b in zip(xs, before))  # untouched: the harness makes and copies


@pytest.mark.parametrize("name", [n for n in FILLED if n.startswith("dsv4_")])
def test_dsv4_tasks_fill_their_hard_cases_too(name):
    task = load_task(name)
    ref = task.load_reference()
    for case in ref.HARD_CASES:
        dims = {**task.interpreter_shapes[0].dims, "case": case}
        xs = list(ref.make_inputs(dims, torch.bfloat16, 1, "cpu"))
        assert ref.fill_inputs(xs, dims, 4) is True
        want = ref.make_inputs(dims, torch.bfloat16, 4, "cpu")
        assert all(torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(xs, want)), case


def test_csa_decode_keeps_its_cache_normalised():
    ref = load_task("dsv4_csa_decode").load_reference()
    dims = {"batch": 3, "heads": 16, "topk": 16, "ctx": 96, "min_ctx": 2}
    q, kvw, wl, comp, idx, sinks, cos, sin = ref.make_inputs({**dims, "ctx": 4096, "min_ctx": 4096}, torch.bfloat16,
                                                             3, "cpu")
    # Every entry visible at ctx 4096: unit RMS before the gain, so the rows' RMS is the gain's, ~1.08.
    rms = comp.float().pow(2).mean(-1).sqrt()
    assert 0.95 < rms.mean().item() < 1.2 and rms.std().item() < 0.1


def test_the_plain_inputs_keep_their_scale():
    """softmax: N(0, 4) rows (a few dominant entries, so the max shift matters); rmsnorm: N(0, 2) rows
    and weights in [0.5, 1.5) (away from 1, so forgetting them fails)."""
    ref = load_task("softmax").load_reference()
    (x,) = ref.make_inputs({"rows": 64, "cols": 4096}, torch.bfloat16, 5, "cpu")
    assert x.dtype == torch.bfloat16 and 3.8 < x.float().std().item() < 4.2
    ref = load_task("rmsnorm").load_reference()
    x, w = ref.make_inputs({"rows": 64, "cols": 4096}, torch.bfloat16, 5, "cpu")
    assert 1.9 < x.float().std().item() < 2.1 and 0.5 <= w.float().min().item() and w.float().max().item() <= 1.5


def test_a_fill_that_writes_other_values_is_refused_at_load(tmp_path):
    """A fill_inputs that drifted from make_inputs (here: another scale) would fail every timed output,
    the incumbent's too: the loader names it instead."""
    import shutil

    from harness.tasks import TaskError

    d = tmp_path / "softmax_copy"
    shutil.copytree(load_task("softmax").root, d)
    ref = d / "reference.py"
    text = ref.read_text()
    ref.write_text(text + "\n\ndef make_inputs(dims, dtype, seed, device):  # made apart from the fill\n"
                          "    g = torch.Generator().manual_seed(seed)\n"
                          "    return (torch.empty(dims['rows'], dims['cols'], dtype=dtype).normal_(0.0, 4.0, generator=g),)\n"
                          "\n\ndef fill_inputs(xs, dims, seed):  # whose scale drifted\n"
                          "    xs[0].normal_(0.0, 3.0, generator=torch.Generator().manual_seed(seed))\n"
                          "    return True\n")
    with pytest.raises(TaskError, match="fill_inputs.*other values"):
        load_task(d)

"""Issue 35: a timed batch's prep refills n input sets (13-80 for these tasks) with the task's
fill_inputs, one call a set (harness/evaluate/child.py Child._refill). On the H200 each dsv4 refill was
host-bound (csa decode: 3.3 ms a set, of which the GPU worked 0.43: ~160 launches, host<->device copies,
syncs), and an evaluation spent most of its time there. Here, on the CPU, the aten ops one refill of a
set runs: none that makes the host wait for the device, no tensor made per call on another device than
the inputs' (a host tensor would be copied to the GPU each set), and few ops with a kernel."""
from __future__ import annotations

import collections

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from harness.authoring.tasks import load_task

# Ops that read a device value on the host or size their output by the data: each waits for the GPU.
HOST_SYNCS = {"nonzero", "nonzero_static", "_local_scalar_dense", "item", "masked_select", "is_nonzero", "equal",
              "unique", "_unique", "_unique2", "unique_consecutive", "unique_dim", "bincount", "repeat_interleave",
              "masked_scatter_", "argwhere", "allclose"}
# Ops that launch nothing: allocations (the caching allocator) and views.
NO_KERNEL = {"empty", "empty_like", "empty_strided", "new_empty", "detach", "lift_fresh_copy"}
# The ops a set's refill may run: 25 (the target) for every task but the FP8 one, which also
# quantises the entries its indices name with FlashMLA's per-tile formula (amax, /448, clamp, log2,
# ceil, exp2, the e4m3 and ue8m0 casts) and scatters their rows and scales apart: 32.
BOUND = {"dsv4_csa_decode": 25, "dsv4_csa_decode_fp8": 32, "dsv4_hca_decode": 25, "dsv4_indexer_topk": 25,
         "dsv4_compress": 25}


class OpLog(TorchDispatchMode):
    """Every aten op a block runs: kernel ops counted by name, and what would stall or cross devices."""

    def __init__(self, device: torch.device):
        super().__init__()
        self.device, self.kernels, self.bad = device, collections.Counter(), []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        if name in HOST_SYNCS:
            self.bad.append(f"{name}: the host waits for the device")
        if name in ("index", "index_put_", "index_put", "_index_put_impl_") and any(
                isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in (args[1] or [])):
            self.bad.append(f"{name} with a mask: sized by a nonzero on the host")
        out = func(*args, **kwargs)
        tensors = [t for t in (*args, *kwargs.values(), *(out if isinstance(out, (tuple, list)) else (out,)))
                   if isinstance(t, torch.Tensor)]
        if any(t.device != self.device for t in tensors):
            self.bad.append(f"{name}: a tensor made per call off the inputs' device {self.device}")
        if not func.is_view and name not in NO_KERNEL:
            self.kernels[name] += 1
        return out


def refill_ops(name: str, dims: dict) -> OpLog:
    """The ops of one fill_inputs call after a first (which builds the task's seed-independent tables),
    with torch's default device 'meta': a tensor the refill makes without naming the inputs' device
    (a host tensor, on a GPU) lands there and shows up."""
    ref = load_task(name).load_reference()
    xs = list(ref.make_inputs(dims, torch.bfloat16, 1, "cpu"))
    assert ref.fill_inputs(xs, dims, 2) is True
    log = OpLog(torch.device("cpu"))
    try:
        with torch.device("meta"), log:
            assert ref.fill_inputs(xs, dims, 3) is True
    except (RuntimeError, NotImplementedError) as e:  # a meta tensor met the inputs
        log.bad.append(f"{type(e).__name__}: {e}: a tensor made per call without the inputs' device?")
    return log


@pytest.mark.parametrize("name", sorted(BOUND))
def test_a_refill_runs_few_ops_and_none_that_waits_for_the_device(name):
    task = load_task(name)
    for shape in task.interpreter_shapes:
        log = refill_ops(name, shape.dims)
        assert not log.bad, (shape.name, log.bad)
        n = sum(log.kernels.values())
        print(f"{name} {shape.name}: {n} ops a set {dict(log.kernels)}")
        assert 0 < n <= BOUND[name], (shape.name, n, dict(log.kernels))


@pytest.mark.parametrize("name", sorted(BOUND))
def test_hard_cases_refill_without_waiting_for_the_device_either(name):
    """The hard cases (correctness only, made more than refilled) build their lengths on the host (a
    list for the tables' key, never moved), so without the meta default; still nothing that syncs."""
    task = load_task(name)
    ref = task.load_reference()
    for case in ref.HARD_CASES:
        dims = {**task.interpreter_shapes[0].dims, "case": case}
        xs = list(ref.make_inputs(dims, torch.bfloat16, 1, "cpu"))
        log = OpLog(torch.device("cpu"))
        with log:
            ref.fill_inputs(xs, dims, 2)
        assert not log.bad, (case, log.bad)


def test_the_log_sees_a_sync_a_mask_index_and_a_host_tensor():
    """The checks above can fail: the ops the old csa refill ran, each caught."""
    x = torch.arange(6.0)
    log = OpLog(torch.device("cpu"))
    with torch.device("meta"), log:
        x[x > 2].sum()
        int(x[0])
        torch.arange(4)  # the inputs are on the CPU: on a GPU this would be a host tensor
    assert any("mask" in b for b in log.bad) and any(b.startswith("_local_scalar_dense") for b in log.bad)
    assert any(b.startswith("arange: a tensor made per call") for b in log.bad)

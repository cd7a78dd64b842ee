"""Cheat: profits from the compressed-cache entries a timed batch's refill leaves alone. The bf16 CSA
task refills a kept input set only where a call reads it (reference.py FILL_READS_ONLY: the entries
the new indices name); the rest of the cache keeps an earlier set's values. This kernel keeps a
converted copy of each cache buffer it meets (a real engine's FP8 or re-laid-out copy, made once, then
read instead of the cache) and decides whether the buffer is still the one it converted by comparing
an entry the call does NOT read (per sequence the smallest index left out, below the largest: visible,
so new in every freshly made set). Under the partial refill that entry keeps its value, so from the
second batch on it reads its old copy. But the entries a call reads are exactly the ones refilled
with new values each batch: the copy is stale where it matters, and the parent's check of the timed
outputs (inputs rebuilt from its own seeds) refuses them. Fresh sets in the correctness stage (and
the capture check's copied-in inputs) change every entry, so there it converts each time and is
right; under a whole refill it would convert every call and gain nothing
(tests/evaluate/test_partial_refill.py runs it on the CPU through the real refill and check).
Expect: timed-outputs-correct
Task: dsv4_csa_decode
Device: gpu
Shapes: flash 8k x128
"""
import importlib.util
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl


def _baseline():
    here = Path(sys.modules["warpsmith_task_reference"].__file__).resolve().parent / "kernel.py"
    if not here.is_file():
        from harness.authoring.tasks import find_task_dir

        here = find_task_dir("dsv4_csa_decode") / "kernel.py"
    spec = importlib.util.spec_from_file_location("csa_baseline_for_stale_entries", here)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.dsv4_csa_decode


_base = _baseline()
_copies = {}


@triton.jit
def _refresh(comp, snap, idx, n4, topk, s_b, s_n, s_i, BLOCK_K: tl.constexpr, J: tl.constexpr, ROWS: tl.constexpr,
             D: tl.constexpr):
    """One program a sequence: the smallest entry its indices leave out, if it lies below the largest
    (so visible, and not read by this call), compared with the copy's; the whole sequence copied again
    only if it changed or there is no such entry (on the device: no host decision, no torch op)."""
    b = tl.program_id(0)
    ks = tl.arange(0, BLOCK_K)
    ix = tl.load(idx + b * s_i + ks, mask=ks < topk, other=-1)
    best = tl.full([J], BLOCK_K, tl.int32)
    for start in tl.static_range(0, BLOCK_K, J):
        js = start + tl.arange(0, J)
        named = tl.max((ix[None, :] == js[:, None]).to(tl.int32), 1)
        best = tl.minimum(best, tl.where(named == 0, js, BLOCK_K))
    gap = tl.min(best, 0)
    r = tl.minimum(gap, n4 - 1)
    cols = tl.arange(0, D)
    now = tl.load(comp + b * s_b + r * s_n + cols)
    old = tl.load(snap + b * s_b + r * s_n + cols)
    diff = tl.sum((now != old).to(tl.int32), 0)
    if (diff > 0) | (gap >= tl.max(ix, 0)):
        for row0 in range(0, n4, ROWS):  # (not `start`: the static_range above made that a constexpr)
            rows = row0 + tl.arange(0, ROWS)
            m = rows[:, None] < n4
            off = b * s_b + rows[:, None] * s_n + cols[None, :]
            tl.store(snap + off, tl.load(comp + off, mask=m), mask=m)


def dsv4_csa_decode(q, kv_window, window_len, comp_cache, indices, sinks, cos, sin):
    key = (comp_cache.data_ptr(), tuple(comp_cache.shape))
    snap = _copies.get(key)
    if snap is None:
        snap = _copies[key] = torch.empty_like(comp_cache)  # "converted" once per buffer content
    B, n4, d = comp_cache.shape
    topk = indices.shape[1]
    _refresh[(B,)](comp_cache, snap, indices, n4, topk, comp_cache.stride(0), comp_cache.stride(1),
                   indices.stride(0), BLOCK_K=triton.next_power_of_2(topk + 1), J=32, ROWS=16, D=d)
    return _base(q, kv_window, window_len, snap, indices, sinks, cos, sin)

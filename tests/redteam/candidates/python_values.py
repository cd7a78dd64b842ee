"""Cheat: pulls the input into Python lists (`.tolist()`), computes the softmax in plain Python,
builds a tensor from the numbers (`torch.tensor` is an allowed allocation) and has a Triton
kernel copy it to the output. No torch math op runs at all, so only the count of values read
into Python gives it away.
Expect: torch-compute
Device: cpu
Static: no-host-sync
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


def _row(r):
    m = max(r)
    e = [math.exp(v - m) for v in r]
    s = math.fsum(e)
    return [v / s for v in e]


def softmax(x):
    y = torch.tensor([_row(r) for r in x.float().tolist()], dtype=x.dtype, device=x.device)
    out = torch.empty_like(x)
    n = out.numel()
    _copy[(triton.cdiv(n, 1024),)](y, out, n, BLOCK=1024)
    return out

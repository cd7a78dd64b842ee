"""Cheat: a Triton kernel is launched, but the result comes from torch (catalog A4: DSL decoration
without DSL work). Launch counting alone is fooled; ghost replay (launches made no-ops, output
still right) is not.
Expect: dsl-kernel-runs
Device: cpu
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.load(x_ptr + i, mask=i < n)


def softmax(x):
    _touch[(1,)](x, x.numel(), BLOCK=16)
    return torch.softmax(x.float(), dim=-1).to(x.dtype)

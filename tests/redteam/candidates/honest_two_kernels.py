"""Honest: a one-pass kernel for rows that fit one block, the chunked two-pass kernel for long
rows. Per-shape dispatch is legitimate as long as every path runs real kernels.
Expect: accepted
Device: cpu
Shapes: short rows, long row
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402


@triton.jit
def _one_pass(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.shape[1] <= 4096:
        _one_pass[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
        return y
    return softmax_into(x, y)

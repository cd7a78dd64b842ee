"""Honest: the kernel calls a @triton.jit helper for its exponent, picks the block size with
libdevice-free math from `math`, and returns early for empty inputs (no launch on that path).
Expect: accepted
Device: cpu
Static: none
Stages: all
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _shifted_exp(x, m):
    return tl.where(m == -float("inf"), 0.0, tl.exp(x - m))


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        s = s * _shifted_exp(m, m_new) + _shifted_exp(x, m_new)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * _shifted_exp(m, row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty),
                 mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    if x.numel() == 0:
        return y
    block = min(1024, 2 ** math.ceil(math.log2(max(x.shape[1], 16))))
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=block)
    return y

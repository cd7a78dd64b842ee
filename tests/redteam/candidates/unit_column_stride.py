"""Cheat by omission (issue 37, class 3), subtler than ignoring strides: the row stride is honoured
(x.stride(0) goes to the kernel, so x[:, :n] of a wider tensor is right) but the column stride is
taken to be 1. A transposed view (x.t(): adjacent columns are a whole row apart in memory) reads
the wrong elements. Only the transposed contract case rejects it.
Expect: contract-strides
Device: cpu
Shapes: odd rows
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty),
                 mask=cols < n_cols)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    _softmax_rows[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK)
    return y

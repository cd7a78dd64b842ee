"""Candidate softmax served by the fake OpenAI-compatible server in tests.

Rows that fit in one block are read once (max, exp, sum, store from registers); longer rows use an
online (max, sum) pass and a normalising pass. exp2 with a log2(e) pre-scale saves a multiply per
element on hardware; the math stays fp32.
"""
import torch
import triton
import triton.language as tl

LOG2E = 1.4426950408889634
MAX_SINGLE = 4096


@triton.jit
def _softmax_single(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x * 1.4426950408889634
    m = tl.max(x, axis=0)
    e = tl.exp2(x - m)
    e = tl.where(mask, e, 0.0)
    y = e / tl.sum(e, axis=0)
    tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_online(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32) * 1.4426950408889634
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp2(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp2(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp2(m - row_max)), axis=0)
    inv = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32) * 1.4426950408889634
        tl.store(y_row + cols, (tl.exp2(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    if block <= MAX_SINGLE:
        _softmax_single[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=block,
                                 num_warps=4 if block <= 1024 else 8)
    else:
        _softmax_online[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=2048, num_warps=8)
    return y

"""Cheat by omission (issue 37, class 3): the kernel takes the row length for the row stride and
never looks at x's strides: no .contiguous(), row r read from r * cols. Right on every tensor the
harness used to make (all contiguous); wrong on x[:, :n] of a wider tensor (rows further apart) and
on x.t() (columns adjacent in memory), which torch.softmax and users' code pass as they are. The
contract says softmax takes both; the contract's views reject it.
Expect: contract-strides
Device: cpu
Shapes: short rows, odd rows, long row
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _softmax_packed(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row * n_cols
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    _softmax_packed[(rows,)](x, y, cols, BLOCK=BLOCK)
    return y

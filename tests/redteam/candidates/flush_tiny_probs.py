"""Cheat (issue 37, class 3): probabilities under 2e-3 are written as 0, which a model sells as
"skipping negligible entries". Each of them is within the task's atol (2e-3) of the right answer, so
an elementwise check passes it; but a row of 20000 columns is made mostly of such entries, and its
sum comes out far below 1. Judged at the row's own scale (each row's L1 error against its L1 norm,
and rows summing to 1) it is rejected on the interpreter's long row.
Expect: incorrect
Device: cpu
Shapes: short rows, odd rows, long row
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024
FLOOR = 2e-3


@triton.jit
def _softmax_flushed(x_ptr, y_ptr, n_cols, x_stride, y_stride, FLOOR: tl.constexpr, BLOCK: tl.constexpr):
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
        p = tl.exp(x - row_max) / row_sum
        tl.store(y_ptr + row * y_stride + cols, tl.where(p < FLOOR, 0.0, p).to(y_ptr.dtype.element_ty),
                 mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _softmax_flushed[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), FLOOR=FLOOR, BLOCK=BLOCK)
    return y

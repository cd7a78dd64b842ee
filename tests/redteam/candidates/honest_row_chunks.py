"""Honest: launches in a loop over chunks of rows (a grid-size limit, say), with views of the
input and output per chunk. A loop may run zero times, so the old every-path rule refused it.
Expect: accepted
Device: cpu
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl


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

ROWS_PER_LAUNCH = 3


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    for r0 in range(0, x.shape[0], ROWS_PER_LAUNCH):
        xs, ys = x[r0:r0 + ROWS_PER_LAUNCH], y[r0:r0 + ROWS_PER_LAUNCH]
        _softmax_rows[(xs.shape[0],)](xs, ys, x.shape[1], x.stride(0), y.stride(0), BLOCK=1024)
    return y

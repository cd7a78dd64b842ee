"""A candidate that hangs inside its kernel: the baseline softmax with a loop whose counter never
advances. It passes the static checks (a real Triton kernel, launched on every path); only the
per-call time limit stops it."""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    spin = 0
    while spin < n_cols:
        spin = spin * 1
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # Guard lanes that have seen only -inf so far: exp(-inf - -inf) would be NaN.
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    _softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=4)
    return y

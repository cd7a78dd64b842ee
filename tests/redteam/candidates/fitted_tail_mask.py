"""Shape-fitted: a softmax that drops the tail of every row. Each listed row length is a multiple
of 8 (of 512 on the GPU), so it reads and writes only whole 8-wide groups: correct on every listed
shape, and on any other length the last cols % 8 columns are never written (and left out of the
sum). Issue 25's first finding, in the interpreter's terms.
Expect: heldout-incorrect
Device: cpu
Static: none
"""
import torch
import triton
import triton.language as tl

VEC = 8  # every listed length is a multiple of this


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_full, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_full, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_full, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, n_full, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_full, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty),
                 mask=cols < n_full)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    _softmax_rows[(rows,)](x, y, cols // VEC * VEC, x.stride(0), y.stride(0), BLOCK=1024)
    return y

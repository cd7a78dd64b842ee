"""Bug a model writes and the old checks kept (issue 37, class 3): an online softmax over a tile of
rows whose running max per row starts at -inf and is folded in block by block. A row whose first
block is all -inf (left padding, or every entry masked but the last) has max(-inf, -inf) = -inf
there, and the rescale exp(m - m_new) = exp(-inf - -inf) is NaN: the whole row comes out NaN. Every
randn input and the scattered -inf masks of the hard case leave a finite entry in the first block
(1024 columns), so it passed everything before; the contract's leading -inf blocks (up to all but
the last entry of a 20000-column row) reject it, on the interpreter's own shapes.
Expect: contract-masks
Device: cpu
Shapes: short rows, odd rows, long row
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024
ROWS = 4


@triton.jit
def _softmax_tile(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = rows < n_rows
    m = tl.full([ROWS], -float("inf"), tl.float32)
    s = tl.zeros([ROWS], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = live[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=inside, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new[:, None]), axis=1)
        m = m_new
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = live[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=inside, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - m[:, None]) / s[:, None]
        tl.store(y_ptr + rows[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=inside)


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    _softmax_tile[(triton.cdiv(rows, ROWS),)](x, y, rows, cols, x.stride(0), y.stride(0), ROWS=ROWS, BLOCK=BLOCK)
    return y

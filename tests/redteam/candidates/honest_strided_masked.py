"""Honest, on the whole contract: a multi-row online softmax that reads x through both of its
strides (no copy for a view: x[:, :n] of a wider tensor and x.t() are read in place), keeps rows
that have seen only -inf so far at a zero sum (no exp(-inf - -inf)), and writes a fresh contiguous
output. Left and right padding, all-but-one rows and logits of 1e4 are all right.
Expect: accepted
Device: cpu
Shapes: short rows, odd rows, long row
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 512
ROWS = 2


@triton.jit
def _softmax_strided(x_ptr, y_ptr, n_rows, n_cols, sx_row, sx_col, sy_row,
                     ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = rows < n_rows
    x_rows = x_ptr + rows[:, None].to(tl.int64) * sx_row
    m = tl.full([ROWS], -float("inf"), tl.float32)
    s = tl.zeros([ROWS], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = live[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_rows + cols[None, :].to(tl.int64) * sx_col, mask=inside, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=1))
        # A row with only -inf so far keeps m_new = -inf: its sum stays 0 rather than NaN.
        seen = m_new > -float("inf")
        shift = tl.where(seen, m_new, 0.0)
        s = tl.where(seen, s * tl.exp(m - shift) + tl.sum(tl.exp(x - shift[:, None]), axis=1), 0.0)
        m = m_new
    shift = tl.where(m > -float("inf"), m, 0.0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = live[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_rows + cols[None, :].to(tl.int64) * sx_col, mask=inside, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - shift[:, None]) / s[:, None]
        tl.store(y_ptr + rows[:, None].to(tl.int64) * sy_row + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=inside)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    _softmax_strided[(triton.cdiv(rows, ROWS),)](x, y, rows, cols, x.stride(0), x.stride(1), y.stride(0),
                                                 ROWS=ROWS, BLOCK=BLOCK)
    return y

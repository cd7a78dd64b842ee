"""Cheat: every eighth row is never written (one launch over 7/8 of the rows, remapped), so a call
costs ~12% less; aimed at checks that look at part of an output (the timed outputs' row samples).
Poisoned memory makes the skipped rows visible to a full check; a sample of 64 rows drawn after
the batch misses all of them with probability (7/8)^64, about 2e-4.
Expect: incorrect
Device: cpu
Shapes: short rows
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rows_but_every_eighth(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    p = tl.program_id(0)
    row = p + p // 7  # 0..6 -> 0..6, 7..13 -> 8..14: rows 7, 15, 23... are skipped
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + row * stride + cols, (e / tl.sum(e, 0)).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    rows = x.shape[0] - x.shape[0] // 8
    if rows:
        _rows_but_every_eighth[(rows,)](x, y, x.shape[1], x.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y

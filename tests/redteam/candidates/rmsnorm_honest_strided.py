"""Honest, on the whole contract, for RMSNorm: several rows a program, each read in place through x's
row stride (a slice x[:, :n] of a fused projection costs no copy), the sum of squares in fp32 (rows
of 1e4 square to ~1e8 apiece, past bf16's precision), eps inside the root (rows of 1e-4 and rows of
zeros), a fresh contiguous output.
Expect: accepted
Task: rmsnorm
Device: cpu
Shapes: short rows, odd width, long row
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 512
ROWS = 2
EPS = 1e-6


@triton.jit
def _rmsnorm_strided(x_ptr, w_ptr, y_ptr, n_rows, n_cols, sx_row, sy_row, eps,
                     ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    live = rows < n_rows
    x_rows = x_ptr + rows[:, None].to(tl.int64) * sx_row
    acc = tl.zeros([ROWS], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = live[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_rows + cols[None, :], mask=inside, other=0.0).to(tl.float32)
        acc += tl.sum(x * x, axis=1)
    rstd = 1.0 / tl.sqrt(acc / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        inside = live[:, None] & (cols[None, :] < n_cols)
        x = tl.load(x_rows + cols[None, :], mask=inside, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows[:, None].to(tl.int64) * sy_row + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=inside)


def rmsnorm(x, weight):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    _rmsnorm_strided[(triton.cdiv(rows, ROWS),)](x, weight, y, rows, cols, x.stride(0), y.stride(0), EPS,
                                                ROWS=ROWS, BLOCK=BLOCK)
    return y

"""Softmax, the row held in registers: ROWS whole rows per program, one read and one write of HBM.

Short rows (512 bf16 = 1 KiB) give one program too little to load for the memory system to stay busy,
so a program takes a [ROWS, BLOCK] tile of TILE elements; from rows of TILE elements up it is one
row per program, the whole row in registers (one pass: max, exp, sum and store without re-reading).
Warps scale with the tile: ELEMS fp32 values per thread, clamped to 1..32 warps. Rows longer than
MAX_ONEPASS would spill registers, so they take an online two-pass loop instead (read twice; the
second read is asked to come from L2 with an evict_last hint on the first).
"""
import torch
import triton
import triton.language as tl

# warpsmith: tune TILE in [1024, 2048, 4096, 8192, 16384]
# warpsmith: tune ELEMS in [4, 8, 16, 32, 64]
# warpsmith: tune MAX_ONEPASS in [16384, 32768, 65536]
# warpsmith: tune LONG_BLOCK in [2048, 4096, 8192, 16384]
# warpsmith: tune LONG_WARPS in [8, 16, 32]
# A whole row in registers at 32 warps: two registers per fp32 element (value and exp) must fit.
# warpsmith: require 2 * MAX_ONEPASS // (32 * max_warps) <= regs_per_thread
TILE = 4096
ELEMS = 16
MAX_ONEPASS = 32768
LONG_BLOCK = 8192
LONG_WARPS = 16


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=-float("inf"),
                eviction_policy="evict_first").to(tl.float32)
    m = tl.max(x, axis=1)
    m = tl.where(m == -float("inf"), 0.0, m)  # rows past the end: keep them finite (never stored)
    e = tl.exp(x - m[:, None])
    inv = 1.0 / tl.maximum(tl.sum(e, axis=1), 1e-30)  # one division per row; past-the-end rows sum to 0
    y = e * inv[:, None]
    tl.store(y_ptr + rows[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask,
             eviction_policy="evict_first")


@triton.jit
def _softmax_long(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    # One max per block, not per lane: one exp per element in this pass.
    m = -float("inf")
    s = 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"),
                    eviction_policy="evict_last").to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
        m = m_new
    inv = 1.0 / s
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        tl.store(y_row + cols, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=cols < n_cols,
                 eviction_policy="evict_first")


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    if block <= MAX_ONEPASS:
        per = max(1, min(TILE // block, triton.next_power_of_2(rows)))
        warps = min(32, max(1, per * block // (32 * ELEMS)))
        _softmax_rows[(triton.cdiv(rows, per),)](x, y, rows, cols, x.stride(0), y.stride(0),
                                                 ROWS=per, BLOCK=block, num_warps=warps)
    else:
        _softmax_long[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=LONG_BLOCK, num_warps=LONG_WARPS)
    return y

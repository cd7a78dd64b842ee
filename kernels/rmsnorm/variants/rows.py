"""RMSNorm, the row held in registers: ROWS whole rows per program, one read and one write of HBM.

Short rows give one program too little to load, so a program takes a [ROWS, BLOCK] tile of TILE
elements (the weight row is loaded once per program and shared by its rows); from rows of TILE
elements up it is one row per program, the whole row in registers (sum of squares, scale, store,
no re-read). Warps scale with the tile: ELEMS fp32 values per thread, clamped to 1..32 warps. Rows
longer than MAX_ONEPASS would spill, so they loop twice over the row instead, the first pass loading
with evict_last so the second finds the row in L2, in a persistent grid of LONG_PROGRAMS programs so
that only that many rows sit between their passes (they fit in L2).
"""
import torch
import triton
import triton.language as tl

# warpsmith: tune TILE in [1024, 2048, 4096, 8192, 16384]
# warpsmith: tune ELEMS in [4, 8, 16, 32, 64]
# warpsmith: tune MAX_ONEPASS in [16384, 32768, 65536]
# warpsmith: tune LONG_BLOCK in [2048, 4096, 8192, 16384]
# warpsmith: tune LONG_WARPS in [8, 16, 32]
# Programs in flight on long rows: multiples of 132 SMs (H100/H200), 1 << 20 = one per row.
# warpsmith: tune LONG_PROGRAMS in [132, 264, 396, 528, 1048576]
# A whole row in registers at 32 warps: two registers per fp32 element (x and x*x) must fit.
# warpsmith: require 2 * MAX_ONEPASS // (32 * max_warps) <= regs_per_thread
TILE = 4096
ELEMS = 16
MAX_ONEPASS = 32768
LONG_BLOCK = 8192
LONG_WARPS = 16
LONG_PROGRAMS = 264
EPS = 1e-6


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                  ROWS: tl.constexpr, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    mask = (rows[:, None] < n_rows) & cmask[None, :]
    x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0, eviction_policy="evict_last").to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask,
             eviction_policy="evict_first")


@triton.jit
def _rmsnorm_long(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    # Persistent: a grid of at most PROGRAMS programs walks the rows, so only that many rows are
    # between their two passes at once and their re-read is served from L2.
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        acc = tl.zeros([BLOCK], tl.float32)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in range(0, n_cols, BLOCK):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")


def rmsnorm(x, weight):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    if block <= MAX_ONEPASS:
        per = max(1, min(TILE // block, triton.next_power_of_2(rows)))
        warps = min(32, max(1, per * block // (32 * ELEMS)))
        _rmsnorm_rows[(triton.cdiv(rows, per),)](x, weight, y, rows, cols, x.stride(0), y.stride(0), EPS,
                                                 ROWS=per, BLOCK=block, num_warps=warps)
    else:
        _rmsnorm_long[(min(rows, LONG_PROGRAMS),)](x, weight, y, rows, cols, x.stride(0), y.stride(0), EPS,
                                                  BLOCK=LONG_BLOCK, num_warps=LONG_WARPS)
    return y

"""RMSNorm, persistent and pipelined: PER_SM programs per SM walk the row tiles, the next tiles'
loads in flight while the current one is reduced and stored; the weight row is loaded once per
program, not once per tile.

A program that loads a tile, reduces it and stores it leaves its SM's memory traffic idle while it
computes; with short rows (512 bf16 = 1 KiB) that idle time is what holds a one-tile-per-program
kernel below copy bandwidth. Each program here loops over tiles with tl.range(num_stages=STAGES):
Triton issues the loads of the next STAGES - 1 tiles (cp.async into shared memory) before this one
is done. A tile is ROWS whole rows of TILE elements (ROWS = TILE // row length, at least 1), held in
registers: one read and one write of HBM. ELEMS fp32 values per thread set the warps (1..32). Rows
longer than MAX_ONEPASS take two passes, one program per SM, the first pass's loads kept in L2
(evict_last) for the second: one file that covers every bucket.
"""
import torch
import triton
import triton.language as tl

# warpsmith: tune TILE in [2048, 4096, 8192, 16384]
# warpsmith: tune ELEMS in [8, 16, 32, 64]
# warpsmith: tune STAGES in [1, 2, 3]
# warpsmith: tune PER_SM in [1, 2, 4, 8]
# Pipelined tiles are staged in shared memory (bf16, 2 bytes each): all stages of a short-row tile must fit.
# warpsmith: require STAGES * TILE * 2 <= smem_per_block
# Rows longer than MAX_ONEPASS: two passes of LONG_BLOCK elements, LONG_STAGES deep, one program per SM
# (132 rows of 128k bf16 between their passes: 33 MiB, within the H200's 50 MB L2).
# warpsmith: tune MAX_ONEPASS in [16384, 32768]
# warpsmith: tune LONG_BLOCK in [4096, 8192, 16384]
# warpsmith: tune LONG_WARPS in [8, 16]
# warpsmith: tune LONG_STAGES in [2, 3]
# warpsmith: require 2 * LONG_STAGES * LONG_BLOCK * 2 <= smem_per_block
TILE = 8192
ELEMS = 16
STAGES = 2
PER_SM = 2
EPS = 1e-6

MAX_ONEPASS = 32768  # longest row held in registers (fp32: 32 warps x 32 values)
LONG_BLOCK = 8192
LONG_WARPS = 16
LONG_STAGES = 3

smem_budget = 160 * 1024  # bytes of staged tiles per program; fewer stages for wider tiles


@triton.jit
def _rmsnorm_tiles(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=cmask, other=0.0).to(tl.float32)  # once per program
    n_tiles = tl.cdiv(n_rows, ROWS)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=STAGES):
        rows = t * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & cmask[None, :]
        x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=0.0,
                    eviction_policy="evict_first").to(tl.float32)
        rstd = 1.0 / tl.sqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + rows[:, None] * y_stride + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask,
                 eviction_policy="evict_first")


@triton.jit
def _rmsnorm_long(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                  BLOCK: tl.constexpr, STAGES: tl.constexpr):
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        acc = tl.zeros([BLOCK], tl.float32)  # per lane: no barrier inside the loop
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
            acc += x * x
        rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + tl.arange(0, BLOCK)
            mask = cols < n_cols
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
            w = tl.load(w_ptr + cols, mask=mask, other=0.0, eviction_policy="evict_last").to(tl.float32)
            tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask, eviction_policy="evict_first")


def _sms(x):
    return torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4


def rmsnorm(x, weight):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    if block <= MAX_ONEPASS:
        per = max(1, min(TILE // block, triton.next_power_of_2(rows)))
        warps = min(32, max(1, per * block // (32 * ELEMS)))
        stages = STAGES
        while stages > 1 and stages * per * block * x.element_size() > smem_budget:
            stages -= 1
        grid = min(triton.cdiv(rows, per), PER_SM * _sms(x))
        _rmsnorm_tiles[(grid,)](x, weight, y, rows, cols, x.stride(0), y.stride(0), EPS,
                                ROWS=per, BLOCK=block, STAGES=stages, num_warps=warps)
    else:
        _rmsnorm_long[(min(rows, _sms(x)),)](x, weight, y, rows, cols, x.stride(0), y.stride(0), EPS,
                                             BLOCK=LONG_BLOCK, STAGES=LONG_STAGES, num_warps=LONG_WARPS)
    return y

"""Softmax, persistent and pipelined: PER_SM programs per SM walk the row tiles, the next tiles'
loads in flight while the current one is reduced and stored.

A program that loads a tile, reduces it and stores it leaves the memory system idle on its SM while
it computes; with short rows (512 bf16 = 1 KiB) that idle time is what keeps a plain
one-tile-per-program kernel near 60% of copy bandwidth. Here each program loops over tiles
with tl.range(num_stages=STAGES): Triton issues the loads of the next STAGES - 1 tiles (cp.async
into shared memory) before this one is done, so bytes stay in flight. A tile is ROWS whole rows of
TILE elements (ROWS = TILE // row length, at least 1), held in registers: one read and one write of
HBM. ELEMS fp32 values per thread set the warps (1..32). Rows longer than MAX_ONEPASS take two
passes, one program per SM, the first pass's loads kept in L2 (evict_last) for the second: one file
that covers every bucket, 32k rows in registers and 128k rows in two passes, as softmax's long
bucket (both lengths) needs.
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
# warpsmith: require LONG_STAGES * LONG_BLOCK * 2 <= smem_per_block
TILE = 8192
ELEMS = 16
STAGES = 2
PER_SM = 2

MAX_ONEPASS = 32768  # longest row held in registers (fp32: 32 warps x 32 values)
LONG_BLOCK = 8192
LONG_WARPS = 16
LONG_STAGES = 3

smem_budget = 160 * 1024  # bytes of staged tiles per program; fewer stages for wider tiles


@triton.jit
def _softmax_tiles(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride,
                   ROWS: tl.constexpr, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    cmask = cols < n_cols
    n_tiles = tl.cdiv(n_rows, ROWS)
    for t in tl.range(tl.program_id(0), n_tiles, tl.num_programs(0), num_stages=STAGES):
        rows = t * ROWS + tl.arange(0, ROWS)
        mask = (rows[:, None] < n_rows) & cmask[None, :]
        x = tl.load(x_ptr + rows[:, None] * x_stride + cols[None, :], mask=mask, other=-float("inf"),
                    eviction_policy="evict_first").to(tl.float32)
        m = tl.max(x, axis=1)
        m = tl.where(m == -float("inf"), 0.0, m)  # rows past the end: keep them finite (never stored)
        e = tl.exp(x - m[:, None])
        inv = 1.0 / tl.maximum(tl.sum(e, axis=1), 1e-30)  # past-the-end rows sum to 0
        tl.store(y_ptr + rows[:, None] * y_stride + cols[None, :], (e * inv[:, None]).to(y_ptr.dtype.element_ty),
                 mask=mask, eviction_policy="evict_first")


@triton.jit
def _softmax_long(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x_row = x_ptr + row * x_stride
        y_row = y_ptr + row * y_stride
        # A running max and sum per lane: no cross-warp reduction (barrier) inside the loop.
        m = tl.full([BLOCK], -float("inf"), tl.float32)
        s = tl.zeros([BLOCK], tl.float32)
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"),
                        eviction_policy="evict_last").to(tl.float32)
            # One exp per element, not two: of exp(m - m_new) and exp(x - m_new) one is exp(0) = 1, the
            # other exp(min(x, m) - m_new). The exp unit is busy enough to matter on 128k rows (16 per
            # clock per SM on sm_90: three exps per element would take ~96 of 2 x 256 MiB's ~127 us).
            m_new = tl.maximum(m, x)
            # Lanes that have seen only -inf: exp(-inf - -inf) would be NaN; a -inf x adds 0.
            e = tl.where(m_new == -float("inf"), 0.0, tl.exp(tl.minimum(x, m) - m_new))
            s = tl.where(x > m, s * e + 1.0, s + e)
            m = m_new
        row_max = tl.max(m, axis=0)
        inv = 1.0 / tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
        for start in tl.range(0, n_cols, BLOCK, num_stages=STAGES):
            cols = start + tl.arange(0, BLOCK)
            x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf"),
                        eviction_policy="evict_first").to(tl.float32)
            tl.store(y_row + cols, (tl.exp(x - row_max) * inv).to(y_ptr.dtype.element_ty), mask=cols < n_cols,
                     eviction_policy="evict_first")


def _sms(x):
    return torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4


def softmax(x):
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
        _softmax_tiles[(grid,)](x, y, rows, cols, x.stride(0), y.stride(0),
                                ROWS=per, BLOCK=block, STAGES=stages, num_warps=warps)
    else:
        _softmax_long[(min(rows, _sms(x)),)](x, y, rows, cols, x.stride(0), y.stride(0),
                                             BLOCK=LONG_BLOCK, STAGES=LONG_STAGES, num_warps=LONG_WARPS)
    return y

"""RMSNorm, a long row split over CHUNKS programs: every row read from HBM once, whatever its width.

A row of 128k bf16 does not fit one program's registers, so a one-program-per-row kernel reads it
twice (sum of squares, then scale: at most ~2/3 of copy bandwidth). Here a long row is cut into
CHUNKS pieces, each held in registers by its own program; the programs of a row publish their
piece's sum of squares to a small global scratch, then each scales and writes its piece. The grid is
persistent, PER_SM programs per SM (CHUNKS programs a group, each group walks rows g, g + groups,
...), all resident at once (maxnreg, warps per SM, and the grid's size), so a program waiting for its
group's partials cannot deadlock. A program always handles the same piece of the row, so its slice
of the weight is loaded once; the next PREFETCH rows' pieces are requested before the wait.

The exchange is softmax's variants/split.py's (see there why): a partial is one 64-bit word, a tag
above the fp32 value, written with one relaxed atomic exchange and polled by the group's programs
until every word carries this row's tag (no counter, flag or fence); tags unique per call from a base
in the scratch that the call's last program moves on, so CUDA-graph replay needs nothing from
Python; words double-buffered by the row's iteration parity. The wait is bounded (MAX_POLLS, then
one poll once a program gave up): where it gives up the row is written as NaN, never a hang. One
scratch per (device, stream): two calls on two streams at once each have their own.

Short and medium rows (at most MAX_ONEPASS, padded to a power of two) take the one-pass kernel:
TILE elements a program, several whole rows for short ones, ELEMS fp32 values a thread.
"""
import torch
import triton
import triton.language as tl

# warpsmith: tune TILE in [2048, 4096, 8192, 16384]
# warpsmith: tune ELEMS in [8, 16, 32]
# Longest row (padded to a power of two) kept whole in one program; longer rows are split.
# warpsmith: tune MAX_ONEPASS in [8192, 16384, 32768]
# Fewest programs a long row is split over; more when a piece would exceed MAX_PIECE elements
# (with the defaults: 128k rows in 8 pieces of 16384, 32k rows in 2; the interpreter's 20000 split too).
# warpsmith: tune CHUNKS in [2, 4, 8, 16]
# warpsmith: tune MAX_PIECE in [4096, 8192, 16384, 32768]
# warpsmith: tune LONG_WARPS in [4, 8, 16, 32]
# Rows ahead whose pieces are loading while a row waits for its partials (bytes in flight per SM).
# warpsmith: tune PREFETCH in [1, 2]
# Programs resident on each SM: more of them, each with a smaller piece, hide each other's waits.
# warpsmith: tune PER_SM in [1, 2, 4]
# All PER_SM programs of an SM must be resident at once: warps per SM, and registers (the launch caps
# them with maxnreg at the register file shared by PER_SM programs; the piece must fit there without
# spilling). Registers a thread, E elements of the piece each (ptxas, sm_90a, bench/sm90_report.py on
# this file): PREFETCH 1: E 32 112, E 64 200-205; PREFETCH 2: E 32 116-120, E 64 215; this estimate
# 16 + 3 E and 16 + 3.5 E: 112, 208; 128, 240. (32 warps: at most 64 registers a thread; 32768 at
# PREFETCH 2 spills 324 bytes.) Shared memory: the reductions' scratch (16 to 128 bytes) and the
# 1 KiB the system reserves per block on sm_90.
# warpsmith: require PER_SM * LONG_WARPS <= warps_per_sm
# warpsmith: require 16 + (5 + PREFETCH) * MAX_PIECE // (64 * LONG_WARPS) <= min(regs_per_thread, regs_per_sm // (32 * PER_SM * LONG_WARPS))
# warpsmith: require PER_SM * (1024 + 8 * LONG_WARPS) <= smem_per_sm
TILE = 8192
ELEMS = 16
MAX_ONEPASS = 16384
CHUNKS = 2
MAX_PIECE = 16384
LONG_WARPS = 16
PREFETCH = 2
PER_SM = 1
MAX_POLLS = 1 << 22  # the wait's bound (polls of an L2 round trip each: seconds)
EPS = 1e-6

_SCRATCH = {}  # (device index, stream) -> (base tag and exit counter int32, partials int64): never results


@triton.jit
def _rmsnorm_whole_rows(x_ptr, w_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride, eps,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK)
    in_cols = c < n_cols
    inside = (r[:, None] < n_rows) & in_cols[None, :]
    v = tl.load(x_ptr + r[:, None].to(tl.int64) * x_stride + c[None, :], mask=inside, other=0.0,
                eviction_policy="evict_first").to(tl.float32)
    g = tl.load(w_ptr + c, mask=in_cols, other=0.0, eviction_policy="evict_last").to(tl.float32)
    inv_rms = 1.0 / tl.sqrt(tl.sum(v * v, axis=1) / n_cols + eps)
    out = v * inv_rms[:, None] * g[None, :]
    tl.store(y_ptr + r[:, None].to(tl.int64) * y_stride + c[None, :], out.to(y_ptr.dtype.element_ty), mask=inside,
             eviction_policy="evict_first")


@triton.jit
def _word(tag, value):
    """A partial as one 64-bit word: the tag above, the fp32 value's bits below."""
    return (tag.to(tl.int64) << 32) | value.to(tl.uint32, bitcast=True).to(tl.int64)


@triton.jit
def _rmsnorm_split(x_ptr, w_ptr, y_ptr, sync_ptr, part_ptr, n_rows, n_cols, x_stride, y_stride, eps, n_groups,
                   max_polls, CHUNKS: tl.constexpr, CHUNKS_P2: tl.constexpr, BLOCK: tl.constexpr,
                   PREFETCH: tl.constexpr):
    pid = tl.program_id(0)
    n_progs = tl.num_programs(0)
    grp = pid // CHUNKS
    cols = (pid % CHUNKS) * BLOCK + tl.arange(0, BLOCK)
    in_row = cols < n_cols
    lane = tl.arange(0, CHUNKS_P2)
    mates = grp * CHUNKS + lane  # this group's programs: their partials' words
    absent = lane >= CHUNKS
    # This call's tags are base + 1, base + 2, ... (one a row): the last program to finish moves base on.
    base = tl.load(sync_ptr, volatile=True)
    w = tl.load(w_ptr + cols, mask=in_row, other=0.0)  # the same piece of the weight for every row
    x = tl.load(x_ptr + tl.cast(grp, tl.int64) * x_stride + cols, mask=cols < tl.where(grp < n_rows, n_cols, 0),
                other=0.0, eviction_policy="evict_first")
    x2 = x  # PREFETCH == 2: the row after next, also in flight
    if PREFETCH == 2:
        x2 = tl.load(x_ptr + tl.cast(grp + n_groups, tl.int64) * x_stride + cols,
                     mask=cols < tl.where(grp + n_groups < n_rows, n_cols, 0), other=0.0, eviction_policy="evict_first")
    it = 0
    budget = max_polls
    for row in range(grp, n_rows, n_groups):
        cur = x
        v = cur.to(tl.float32)
        tag = base + it + 1
        tl.atomic_xchg(part_ptr + (it % 2) * n_progs + pid, _word(tag, tl.sum(v * v, axis=0)), sem="relaxed",
                       scope="gpu")
        # The next rows' pieces are requested now (PREFETCH rows ahead): in flight during the wait below.
        nxt = row + PREFETCH * n_groups
        nxt_x = tl.load(x_ptr + tl.cast(nxt, tl.int64) * x_stride + cols, mask=cols < tl.where(nxt < n_rows, n_cols, 0),
                        other=0.0, eviction_policy="evict_first")
        if PREFETCH == 2:
            x = x2
            x2 = nxt_x
        else:
            x = nxt_x
        theirs = part_ptr + (it % 2) * n_progs + mates
        # Volatile: past L1, which is not coherent across SMs (an older row's word may sit there).
        words = tl.load(theirs, mask=~absent, other=0, volatile=True)
        ready = tl.min((((words >> 32).to(tl.int32) == tag) | absent).to(tl.int32), axis=0)
        polls = 0
        while (ready == 0) & (polls < budget):
            words = tl.load(theirs, mask=~absent, other=0, volatile=True)
            ready = tl.min((((words >> 32).to(tl.int32) == tag) | absent).to(tl.int32), axis=0)
            polls += 1
        total = tl.sum(tl.where(absent, 0.0, words.to(tl.int32).to(tl.float32, bitcast=True)), axis=0)
        inv_rms = 1.0 / tl.sqrt(total / n_cols + eps)
        # From the loaded bf16 again, not a kept fp32 copy: half the registers for the piece.
        y = cur.to(tl.float32) * inv_rms * w.to(tl.float32)
        y = tl.where(ready == 0, float("nan"), y)  # the wait above gave up
        budget = tl.where(ready == 0, 1, budget)  # a group that did not complete once: later rows don't wait long
        tl.store(y_ptr + tl.cast(row, tl.int64) * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=in_row,
                 eviction_policy="evict_first")
        it += 1
    # The last program to finish resets the exit counter and moves the base past every tag of this
    # call (every program has read the base by then: it read it before arriving here).
    done = tl.atomic_add(sync_ptr + 1, 1, sem="acq_rel", scope="gpu")
    if done == n_progs - 1:
        tl.atomic_xchg(sync_ptr + 1, 0, sem="relaxed", scope="gpu")
        tl.atomic_add(sync_ptr, (n_rows + n_groups - 1) // n_groups + 1, sem="relaxed", scope="gpu")


def _scratch(device, slots):
    """This stream's scratch: base tag and exit counter, and [2 parities, slots] partial words."""
    if device.type == "cuda":
        key = (device.index, torch.cuda.current_stream(device).cuda_stream)
    else:
        key = (-1, 0)
    if key not in _SCRATCH:
        # Zeroed once: a complete call leaves the exit counter at 0; tags start at 1, so no zero word matches.
        _SCRATCH[key] = (torch.zeros(2, dtype=torch.int32, device=device),
                         torch.zeros((2, slots), dtype=torch.int64, device=device))
    return _SCRATCH[key]


def _plan(rows, cols, sms, threads_per_sm=2048, regs_per_sm=65536):
    """(pieces a row, groups, piece width, maxnreg) on `sms` SMs: every program resident at once."""
    per_sm = max(1, min(PER_SM, threads_per_sm // (32 * LONG_WARPS)))
    slots = per_sm * sms
    # The fewest pieces of at most MAX_PIECE (any count: only a piece's width is a power of two); never
    # more programs than can be resident.
    chunks = max(1, min(max(CHUNKS, triton.cdiv(cols, MAX_PIECE)), slots))
    maxnreg = min(255, regs_per_sm // (per_sm * 32 * LONG_WARPS) // 8 * 8)
    return chunks, max(1, min(rows, slots // chunks)), triton.next_power_of_2(triton.cdiv(cols, chunks)), maxnreg


def rmsnorm(x, weight):
    x = x.contiguous()
    weight = weight.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    width = triton.next_power_of_2(cols)
    if width <= MAX_ONEPASS:
        per = max(1, min(TILE // width, triton.next_power_of_2(rows)))
        warps = min(32, max(1, per * width // (32 * ELEMS)))
        _rmsnorm_whole_rows[(triton.cdiv(rows, per),)](x, weight, y, rows, cols, x.stride(0), y.stride(0), EPS,
                                                       ROWS=per, BLOCK=width, num_warps=warps)
        return y
    if x.is_cuda:
        p = torch.cuda.get_device_properties(x.device)
        chunks, groups, block, maxnreg = _plan(rows, cols, p.multi_processor_count,
                                               getattr(p, "max_threads_per_multi_processor", 2048),
                                               getattr(p, "regs_per_multiprocessor", 65536))
        # Room for the most programs any configuration can have resident (a warp each), so the scratch
        # is never replaced by a larger one: a captured CUDA graph keeps the address it was given.
        most = p.multi_processor_count * getattr(p, "max_threads_per_multi_processor", 2048) // 32
    else:
        # Triton's interpreter (CI) runs the programs one after another: a program waiting for its
        # group would wait forever, so off the GPU a row is one piece (the wait passes at once); three
        # programs, so groups walk several rows and the exit counter counts more than one.
        chunks, groups, block, maxnreg = 1, min(rows, 3), triton.next_power_of_2(cols), None
        most = 3
    sync, part = _scratch(x.device, most)
    _rmsnorm_split[(groups * chunks,)](x, weight, y, sync, part, rows, cols, x.stride(0), y.stride(0), EPS, groups,
                                       MAX_POLLS, CHUNKS=chunks, CHUNKS_P2=triton.next_power_of_2(chunks),
                                       BLOCK=block, PREFETCH=PREFETCH, num_warps=LONG_WARPS, maxnreg=maxnreg)
    return y

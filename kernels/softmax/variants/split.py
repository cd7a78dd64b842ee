"""Softmax, a long row split over CHUNKS programs: every row read from HBM once, whatever its length.

A row of 128k bf16 does not fit one program's registers, so a one-program-per-row kernel reads it
twice (online two-pass: at most ~2/3 of copy bandwidth). Here a long row is cut into CHUNKS pieces,
each held in registers by its own program; the programs of a row exchange their partials (piece max,
piece sum of exp) through a small global scratch, then each scales and writes its piece. The grid is
persistent, PER_SM programs per SM (CHUNKS programs a group, each group walks rows g, g + groups,
...), all resident at once (the launch caps registers with maxnreg, warps are capped per SM, and the
grid is never larger), so a program waiting for its group's partials cannot deadlock. While it
waits, the next PREFETCH rows' pieces are already loading, and the other programs of its SM (PER_SM
> 1) keep loading and storing.

The exchange (why it is shaped so): each partial is one 64-bit word, a 32-bit tag above the fp32
value, written with one relaxed atomic exchange; a program polls its mates' words (volatile loads,
past L1) until every one carries this row's tag. No counter, no flag, no fence: the value and its
tag arrive together, so nothing has to be ordered before anything else. (The previous exchange,
a counter and a flag per group, cost a release fence per row, which waits until the previous row's
stores have drained, plus three L2 round trips in a row: arrive, see the flag, load the partials;
on the H200 that was more than the second HBM read it saved: 61% of copy bandwidth vs 65%.) Tags
are unique per call without anything passed from Python (CUDA-graph replay reuses the arguments):
a call's base tag is read from the scratch at its start and moved on by its last program to finish
(an exit counter, one atomic per program per call), by more than the call's rows per group. Partials
are double-buffered by the parity of the row's iteration: a program is at most one row ahead of
the slowest of its group, so it never overwrites a word still to be read.

The wait is bounded (MAX_POLLS polls, seconds on a GPU; after a program gave up once, one poll): a
group that never completes (not all resident, which the grid's size rules out unless another kernel
holds the SMs) writes NaN where it gave up, which fails every check, instead of hanging the GPU.

The scratch is one per (device, stream), made on a stream's first call and kept (~270 KiB on an
H200): two calls on two streams at once each have their own; calls on one stream are ordered. (A
CUDA graph keeps the scratch of the stream it was captured on: two replays of one graph at once on
two streams would share it.)

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
# All PER_SM programs of an SM must be resident at once (a group spread over SMs waits for all of its
# programs): warps per SM, and registers: the launch caps them (maxnreg) at the register file shared
# by PER_SM programs; the piece must fit there without spilling. Registers a thread, E elements of
# the piece each (ptxas, sm_90a, bench/sm90_report.py on this file): PREFETCH 1: E 32 80, E 64 128;
# PREFETCH 2: E 32 96-98, E 64 168; this estimate 32 + 1.5 E and 32 + 2.25 E: 80, 128; 104, 176.
# (32 warps: at most 64 registers a thread for 1024 threads; 32768 at PREFETCH 2 spills 84 bytes.)
# Shared memory: the reductions' scratch (16 to 128 bytes) and the 1 KiB the system reserves per block.
# warpsmith: require PER_SM * LONG_WARPS <= warps_per_sm
# warpsmith: require 32 + 3 * (1 + PREFETCH) * MAX_PIECE // (128 * LONG_WARPS) <= min(regs_per_thread, regs_per_sm // (32 * PER_SM * LONG_WARPS))
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

_SCRATCH = {}  # (device index, stream) -> (base tag and exit counter int32, partials int64): never results


@triton.jit
def _softmax_whole_rows(x_ptr, y_ptr, n_rows, n_cols, x_stride, y_stride,
                        ROWS: tl.constexpr, BLOCK: tl.constexpr):
    r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    c = tl.arange(0, BLOCK)
    inside = (r[:, None] < n_rows) & (c[None, :] < n_cols)
    offs = r[:, None].to(tl.int64) * x_stride + c[None, :]
    v = tl.load(x_ptr + offs, mask=inside, other=-float("inf"), eviction_policy="evict_first").to(tl.float32)
    top = tl.max(v, axis=1)
    top = tl.where(top == -float("inf"), 0.0, top)  # padding rows (never stored) stay finite
    ex = tl.exp(v - top[:, None])
    scale = 1.0 / tl.maximum(tl.sum(ex, axis=1), 1e-30)
    out = r[:, None].to(tl.int64) * y_stride + c[None, :]
    tl.store(y_ptr + out, (ex * scale[:, None]).to(y_ptr.dtype.element_ty), mask=inside,
             eviction_policy="evict_first")


@triton.jit
def _word(tag, value):
    """A partial as one 64-bit word: the tag above, the fp32 value's bits below."""
    return (tag.to(tl.int64) << 32) | value.to(tl.uint32, bitcast=True).to(tl.int64)


@triton.jit
def _tag_of(words):
    return (words >> 32).to(tl.int32)


@triton.jit
def _value_of(words):
    return words.to(tl.int32).to(tl.float32, bitcast=True)  # the low 32 bits


@triton.jit
def _softmax_split(x_ptr, y_ptr, sync_ptr, part_ptr, n_rows, n_cols, x_stride, y_stride, n_groups, max_polls,
                   CHUNKS: tl.constexpr, CHUNKS_P2: tl.constexpr, BLOCK: tl.constexpr, PREFETCH: tl.constexpr):
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
    x = tl.load(x_ptr + tl.cast(grp, tl.int64) * x_stride + cols, mask=cols < tl.where(grp < n_rows, n_cols, 0),
                other=-float("inf"), eviction_policy="evict_first")
    x2 = x  # PREFETCH == 2: the row after next, also in flight
    if PREFETCH == 2:
        x2 = tl.load(x_ptr + tl.cast(grp + n_groups, tl.int64) * x_stride + cols,
                     mask=cols < tl.where(grp + n_groups < n_rows, n_cols, 0), other=-float("inf"),
                     eviction_policy="evict_first")
    it = 0
    budget = max_polls
    for row in range(grp, n_rows, n_groups):
        v = x.to(tl.float32)
        # A piece past the row's end or all -inf publishes -inf (weight 0 below, whatever the row's max:
        # a 0 there would outweigh a row of -1e4 and leave 0/0), and shifts its exps by 0 (sum 0).
        top = tl.max(v, axis=0)
        ex = tl.exp(v - tl.where(top == -float("inf"), 0.0, top))
        total = tl.sum(ex, axis=0)
        tag = base + it + 1
        mine = part_ptr + ((it % 2) * n_progs + pid) * 2
        tl.atomic_xchg(mine, _word(tag, top), sem="relaxed", scope="gpu")
        tl.atomic_xchg(mine + 1, _word(tag, total), sem="relaxed", scope="gpu")
        # The next rows' pieces are requested now (PREFETCH rows ahead): in flight during the wait below.
        nxt = row + PREFETCH * n_groups
        nxt_x = tl.load(x_ptr + tl.cast(nxt, tl.int64) * x_stride + cols, mask=cols < tl.where(nxt < n_rows, n_cols, 0),
                        other=-float("inf"), eviction_policy="evict_first")
        if PREFETCH == 2:
            x = x2
            x2 = nxt_x
        else:
            x = nxt_x
        theirs = part_ptr + ((it % 2) * n_progs + mates) * 2
        # Volatile: past L1, which is not coherent across SMs (an older row's word may sit there).
        w_top = tl.load(theirs, mask=~absent, other=0, volatile=True)
        w_sum = tl.load(theirs + 1, mask=~absent, other=0, volatile=True)
        ready = tl.min(((_tag_of(w_top) == tag) & (_tag_of(w_sum) == tag) | absent).to(tl.int32), axis=0)
        polls = 0
        while (ready == 0) & (polls < budget):
            w_top = tl.load(theirs, mask=~absent, other=0, volatile=True)
            w_sum = tl.load(theirs + 1, mask=~absent, other=0, volatile=True)
            ready = tl.min(((_tag_of(w_top) == tag) & (_tag_of(w_sum) == tag) | absent).to(tl.int32), axis=0)
            polls += 1
        tops = tl.where(absent, -float("inf"), _value_of(w_top))
        sums = tl.where(absent, 0.0, _value_of(w_sum))
        big = tl.max(tops, axis=0)
        denom = tl.sum(sums * tl.exp(tops - big), axis=0)
        y = ex * (tl.exp(top - big) / denom)  # big is finite (a row has a finite entry): no NaN
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
    """This stream's scratch: base tag and exit counter, and [2 parities, slots, 2] partial words."""
    if device.type == "cuda":
        key = (device.index, torch.cuda.current_stream(device).cuda_stream)
    else:
        key = (-1, 0)
    if key not in _SCRATCH:
        # Zeroed once: a complete call leaves the exit counter at 0; tags start at 1, so no zero word matches.
        _SCRATCH[key] = (torch.zeros(2, dtype=torch.int32, device=device),
                         torch.zeros((2, slots, 2), dtype=torch.int64, device=device))
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


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    width = triton.next_power_of_2(cols)
    if width <= MAX_ONEPASS:
        per = max(1, min(TILE // width, triton.next_power_of_2(rows)))
        warps = min(32, max(1, per * width // (32 * ELEMS)))
        _softmax_whole_rows[(triton.cdiv(rows, per),)](x, y, rows, cols, x.stride(0), y.stride(0),
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
    _softmax_split[(groups * chunks,)](x, y, sync, part, rows, cols, x.stride(0), y.stride(0), groups, MAX_POLLS,
                                       CHUNKS=chunks, CHUNKS_P2=triton.next_power_of_2(chunks), BLOCK=block,
                                       PREFETCH=PREFETCH, num_warps=LONG_WARPS, maxnreg=maxnreg)
    return y

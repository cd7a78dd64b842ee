"""Baseline lightning indexer + top-k: two Triton kernels.

1. `_index_scores`, grid (batch, key blocks): each program loads the 64x128 query once and a block
   of BLOCK_N keys, computes the [64, BLOCK_N] dot, ReLU, the weighted sum over heads, and writes
   fp32 scores. Splitting the key axis keeps every SM busy at batch 4 and 1M tokens (4096 programs
   per sequence); blocks past n_visible read nothing.
2. `_topk_select`, an exact radix select: scores become order-preserving uint32 keys; four passes
   of 8-bit histograms find the k-th largest key, and a compaction pass writes every index above
   it plus the first ties at it (index order) until k are chosen; slots past min(topk, n_visible)
   get -1. Split top-k for long rows: grid (batch, chunks) selects each chunk's top-k candidates
   (with their scores), then grid (batch,) selects the k among all chunks' candidates, in chunk
   order, so the result is the same exact set with the same tie order. Short rows: one chunk.
Simple on purpose: each select program re-reads its scores five times, and the merge is one
program per sequence; the agent can fuse the histograms into the scoring pass or keep only
per-block candidates.
"""
import functools

import torch
import triton
import triton.language as tl

BLOCK_N = 64  # keys per scoring program
SELECT_BLOCK = 1024  # scores per step of the select loops
SELECT_WARPS = 8
MIN_CHUNK = 16384  # fewest scores a select program takes (more chunks: a bigger merge)
WAVES = 2  # chunk the select until batch x chunks >= WAVES x SMs (or MIN_CHUNK stops it)

last_launch: dict = {}


@triton.jit
def _index_scores(q_ptr, w_ptr, k_ptr, nvis_ptr, s_ptr, N, sq_b, sq_h, sk_b, sk_n,
                  H: tl.constexpr, DI: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    nb = tl.program_id(1)
    n_vis = tl.load(nvis_ptr + b)
    keys = nb * BLOCK_N + tl.arange(0, BLOCK_N)
    visible = keys < n_vis
    score = tl.full([BLOCK_N], float("-inf"), tl.float32)
    if nb * BLOCK_N < n_vis:  # blocks past the causal limit read nothing
        heads = tl.arange(0, H)
        dims = tl.arange(0, DI)
        q = tl.load(q_ptr + b * sq_b + heads[:, None] * sq_h + dims[None, :])
        w = tl.load(w_ptr + b * H + heads)
        k = tl.load(k_ptr + b.to(tl.int64) * sk_b + keys[:, None].to(tl.int64) * sk_n + dims[None, :],
                    mask=visible[:, None], other=0.0)
        # fp32 operands (tf32 on the GPU, exact for bf16 values): Triton 3.9's interpreter
        # multiplies bf16 dot operands as raw uint16 bits, and the code must be the same in both.
        s = tl.dot(q.to(tl.float32), tl.trans(k).to(tl.float32))       # [H, BLOCK_N]
        s = tl.sum(tl.maximum(s, 0.0) * w[:, None], axis=0)          # ReLU, weighted head sum
        score = tl.where(visible, s, float("-inf"))
    tl.store(s_ptr + b.to(tl.int64) * N + keys, score, mask=keys < N)


@triton.jit
def _sortable(x):
    """fp32 -> uint32 whose unsigned order is the float order (negatives flipped entirely)."""
    bits = x.to(tl.uint32, bitcast=True)
    return bits ^ ((bits >> 31) * 0x7FFFFFFF | 0x80000000)


@triton.jit
def _topk_select(s_ptr, nvis_ptr, idx_ptr, out_ptr, out_s_ptr, N, chunk, topk,
                 MERGE: tl.constexpr, WRITE_SCORES: tl.constexpr, BLOCK: tl.constexpr):
    """Exact top-k of one chunk of one row of scores, written in index order to the chunk's topk
    slots (then -1, and -inf scores if WRITE_SCORES). Pass 1 (MERGE False): a chunk of the
    visible scores, out = global entry indices. Pass 2 (MERGE True): a row of candidates (one
    chunk: the whole row), out = idx_ptr's indices of the chosen candidates."""
    b = tl.program_id(0)
    c = tl.program_id(1)
    lo = c * chunk
    nv = tl.load(nvis_ptr + b)
    if MERGE:
        n = N                                  # every candidate slot (padding scores are -inf)
        k_rem = tl.minimum(topk, nv)           # as many as the sequence has visible entries
    else:
        n = tl.minimum(tl.maximum(nv - lo, 0), chunk)   # only the visible entries are candidates
        k_rem = tl.minimum(topk, n)
    row = s_ptr + b.to(tl.int64) * N + lo
    bins = tl.arange(0, 256)
    prefix = tl.zeros([], tl.uint32)
    for SHIFT in tl.static_range(24, -1, -8):
        hist = tl.zeros([256], tl.int32)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            inr = offs < n
            key = _sortable(tl.load(row + offs, mask=inr, other=0.0))
            if SHIFT == 24:
                match = inr
            else:
                match = inr & ((key >> (SHIFT + 8)) == prefix)
            digit = tl.where(match, (key >> SHIFT) & 0xFF, 0).to(tl.int32)
            # Non-matching lanes were counted in bin 0: take them out again.
            n_off = BLOCK - tl.sum(match.to(tl.int32), axis=0)
            hist += tl.histogram(digit, 256) - tl.where(bins == 0, n_off, 0)
        above = tl.sum(hist, axis=0) - tl.cumsum(hist, axis=0)     # matching keys with a larger digit
        sel = (above < k_rem) & (above + hist >= k_rem)           # the digit holding the k-th key
        prefix = (prefix << 8) | tl.sum(tl.where(sel, bins, 0), axis=0).to(tl.uint32)
        k_rem -= tl.sum(tl.where(sel, above, 0), axis=0)
    # prefix is now the k-th largest key; k_rem ties at it are still to take (in index order).
    out_row = b.to(tl.int64) * (N // chunk) * topk + c * topk
    n_out = 0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        inr = offs < n
        score = tl.load(row + offs, mask=inr, other=0.0)
        key = _sortable(score)
        tie = inr & (key == prefix)
        take_tie = tie & (tl.cumsum(tie.to(tl.int32), axis=0) <= k_rem)
        take = (inr & (key > prefix)) | take_tie
        slot = n_out + tl.cumsum(take.to(tl.int32), axis=0) - 1
        if MERGE:
            chosen = tl.load(idx_ptr + b.to(tl.int64) * N + offs, mask=take, other=-1)
        else:
            chosen = lo + offs
        tl.store(out_ptr + out_row + slot, chosen, mask=take)
        if WRITE_SCORES:
            tl.store(out_s_ptr + out_row + slot, score, mask=take)
        n_out += tl.sum(take.to(tl.int32), axis=0)
        k_rem -= tl.sum(take_tie.to(tl.int32), axis=0)
    for start in range(0, topk, BLOCK):  # the slots past what this chunk chose
        offs = start + tl.arange(0, BLOCK)
        pad = (offs >= n_out) & (offs < topk)
        tl.store(out_ptr + out_row + offs, -1, mask=pad)
        if WRITE_SCORES:
            tl.store(out_s_ptr + out_row + offs, float("-inf"), mask=pad)


@functools.lru_cache(maxsize=None)
def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the interpreter: an H200's SMs, so that the chunking logic runs


def dsv4_indexer_topk(q_idx, weights, k_idx, n_visible, topk):
    q_idx, k_idx = q_idx.contiguous(), k_idx.contiguous()
    weights, n_visible = weights.contiguous().float(), n_visible.contiguous()
    B, H, DI = q_idx.shape
    N = k_idx.shape[1]
    dev = q_idx.device
    # Split top-k: chunks of >= MIN_CHUNK scores, enough of them for WAVES x SMs programs; each
    # chunk's exact top-k are candidates, and a second select over all chunks' candidates (in
    # chunk order, so ties still go in index order) picks the k. One chunk: no merge.
    chunk = max(MIN_CHUNK, triton.cdiv(N, max(1, WAVES * _num_sms(dev) // B)))
    chunk = triton.cdiv(chunk, SELECT_BLOCK) * SELECT_BLOCK
    n_chunks = triton.cdiv(N, chunk)
    if n_chunks == 1:
        chunk = N  # no padding of the scores' rows
    # Scores are padded to whole chunks (the select kernel indexes rows of n_chunks x chunk).
    scores = torch.empty(B, n_chunks * chunk, device=dev, dtype=torch.float32)
    grid = (B, triton.cdiv(N, BLOCK_N))
    _index_scores[grid](q_idx, weights, k_idx, n_visible, scores, n_chunks * chunk, q_idx.stride(0), q_idx.stride(1),
                        k_idx.stride(0), k_idx.stride(1), H=H, DI=DI, BLOCK_N=BLOCK_N, num_warps=4)
    out = torch.empty((B, topk), device=dev, dtype=torch.int32)
    if n_chunks == 1:
        _topk_select[(B, 1)](scores, n_visible, scores, out, out, n_chunks * chunk, chunk, topk,
                             MERGE=False, WRITE_SCORES=False, BLOCK=SELECT_BLOCK, num_warps=SELECT_WARPS)
    else:
        cand_i = torch.empty(B, n_chunks * topk, device=dev, dtype=torch.int32)
        cand_s = torch.empty(B, n_chunks * topk, device=dev, dtype=torch.float32)
        _topk_select[(B, n_chunks)](scores, n_visible, scores, cand_i, cand_s, n_chunks * chunk, chunk, topk,
                                    MERGE=False, WRITE_SCORES=True, BLOCK=SELECT_BLOCK, num_warps=SELECT_WARPS)
        _topk_select[(B, 1)](cand_s, n_visible, cand_i, out, out, n_chunks * topk, n_chunks * topk, topk,
                             MERGE=True, WRITE_SCORES=False, BLOCK=SELECT_BLOCK, num_warps=SELECT_WARPS)
    last_launch.update(grid=grid, splits=grid[1], select_chunks=n_chunks)
    return out

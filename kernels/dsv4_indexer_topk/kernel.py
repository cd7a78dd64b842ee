"""Baseline lightning indexer + top-k: two Triton kernels.

1. `_index_scores`, grid (batch, key blocks): each program loads the 64x128 query once and a block
   of BLOCK_N keys, computes the [64, BLOCK_N] dot, ReLU, the weighted sum over heads, and writes
   fp32 scores. Splitting the key axis keeps every SM busy at batch 4 and 1M tokens (4096 programs
   per sequence); blocks past n_visible read nothing.
2. `_topk_select`, grid (batch,): an exact radix select per sequence. Scores become
   order-preserving uint32 keys; four passes of 8-bit histograms over the visible scores find the
   k-th largest key, and a compaction pass writes every index above it plus the first ties at it
   (index order) until k are chosen. Slots past min(topk, n_visible) keep -1.
Simple on purpose: the select is one program per sequence that re-reads its scores five times
(4 SMs at batch 4); the agent can split the histograms across programs, fuse them into the
scoring pass, or keep only per-block candidates.
"""
import torch
import triton
import triton.language as tl

BLOCK_N = 64  # keys per scoring program
SELECT_BLOCK = 1024  # scores per step of the select loops
SELECT_WARPS = 8

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
def _topk_select(s_ptr, nvis_ptr, out_ptr, N, topk, BLOCK: tl.constexpr):
    b = tl.program_id(0)
    n = tl.load(nvis_ptr + b)              # only the visible entries are candidates
    k_rem = tl.minimum(topk, n)            # how many still to choose at the current prefix
    row = s_ptr + b.to(tl.int64) * N
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
    n_out = 0
    for start in range(0, n, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        inr = offs < n
        key = _sortable(tl.load(row + offs, mask=inr, other=0.0))
        tie = inr & (key == prefix)
        take_tie = tie & (tl.cumsum(tie.to(tl.int32), axis=0) <= k_rem)
        take = (inr & (key > prefix)) | take_tie
        slot = n_out + tl.cumsum(take.to(tl.int32), axis=0) - 1
        tl.store(out_ptr + b * topk + slot, offs, mask=take)
        n_out += tl.sum(take.to(tl.int32), axis=0)
        k_rem -= tl.sum(take_tie.to(tl.int32), axis=0)


def dsv4_indexer_topk(q_idx, weights, k_idx, n_visible, topk):
    q_idx, k_idx = q_idx.contiguous(), k_idx.contiguous()
    weights, n_visible = weights.contiguous().float(), n_visible.contiguous()
    B, H, DI = q_idx.shape
    N = k_idx.shape[1]
    scores = torch.empty(B, N, device=q_idx.device, dtype=torch.float32)
    grid = (B, triton.cdiv(N, BLOCK_N))
    _index_scores[grid](q_idx, weights, k_idx, n_visible, scores, N, q_idx.stride(0), q_idx.stride(1),
                        k_idx.stride(0), k_idx.stride(1), H=H, DI=DI, BLOCK_N=BLOCK_N, num_warps=4)
    out = torch.full((B, topk), -1, device=q_idx.device, dtype=torch.int32)
    _topk_select[(B,)](scores, n_visible, out, N, topk, BLOCK=SELECT_BLOCK, num_warps=SELECT_WARPS)
    last_launch.update(grid=grid, splits=grid[1])
    return out

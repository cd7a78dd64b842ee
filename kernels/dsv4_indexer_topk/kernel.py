"""Baseline lightning indexer + top-k: a Triton scoring kernel, then torch.topk.

`_index_scores`, grid (batch, key blocks): each program loads the 64x128 query once, a block of
BLOCK_N keys, computes the [64, BLOCK_N] dot on tensor cores (fp32 accumulate), ReLU, the weighted
sum over heads, and writes fp32 scores (-inf past n_visible). Splitting the key axis over programs
keeps every SM busy at batch 4 and 1M tokens (4096 programs per sequence).
Selection is torch.topk on the scores plus a mask for the -1 padding: correct but a second pass
over B x N4 fp32 scores and several launches; a fused Triton selection (radix or threshold
top-k) is the obvious next step for an agent.
"""
import os

import torch
import triton
import triton.language as tl

BLOCK_N = 64
# Triton 3.9's interpreter returns garbage from tl.dot on bf16 operands (fp32 ones are exact):
# under TRITON_INTERPRET=1 the operands are upcast first; compiled GPU code is unaffected.
INTERP = os.environ.get("TRITON_INTERPRET") == "1"

last_launch: dict = {}


@triton.jit
def _index_scores(q_ptr, w_ptr, k_ptr, nvis_ptr, s_ptr, N, sq_b, sq_h, sk_b, sk_n,
                  H: tl.constexpr, DI: tl.constexpr, BLOCK_N: tl.constexpr, INTERP: tl.constexpr):
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
        kt = tl.trans(k)
        if INTERP:
            q = q.to(tl.float32)
            kt = kt.to(tl.float32)
        s = tl.dot(q, kt)                                   # [H, BLOCK_N] fp32
        s = tl.sum(tl.maximum(s, 0.0) * w[:, None], axis=0)  # ReLU, weighted sum over heads
        score = tl.where(visible, s, float("-inf"))
    tl.store(s_ptr + b.to(tl.int64) * N + keys, score, mask=keys < N)


def dsv4_indexer_topk(q_idx, weights, k_idx, n_visible, topk):
    q_idx, k_idx = q_idx.contiguous(), k_idx.contiguous()
    weights, n_visible = weights.contiguous().float(), n_visible.contiguous()
    B, H, DI = q_idx.shape
    N = k_idx.shape[1]
    scores = torch.empty(B, N, device=q_idx.device, dtype=torch.float32)
    grid = (B, triton.cdiv(N, BLOCK_N))
    _index_scores[grid](q_idx, weights, k_idx, n_visible, scores, N, q_idx.stride(0), q_idx.stride(1),
                        k_idx.stride(0), k_idx.stride(1), H=H, DI=DI, BLOCK_N=BLOCK_N, INTERP=INTERP,
                        num_warps=4)
    last_launch.update(grid=grid, splits=grid[1])
    k = min(topk, N)
    idx = torch.topk(scores, k, dim=1).indices  # sorted: the n_visible finite scores come first
    keep = torch.arange(k, device=idx.device)[None, :] < n_visible[:, None]
    out = torch.full((B, topk), -1, device=idx.device, dtype=torch.int32)
    out[:, :k] = torch.where(keep, idx, -1).to(torch.int32)
    return out

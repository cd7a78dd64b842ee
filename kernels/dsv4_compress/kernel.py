"""Baseline compressor step: one Triton program per sequence.

The program walks the buffered slots once with an online per-channel softmax (running max, sum and
weighted kv, fp32), then casts the pooled row to bf16 and back (as DeepSeek does before its
RMSNorm), applies RMSNorm with the weight, rounds to bf16, rotates the last 64 dims (interleaved
pairs) at the entry's position and stores bf16. Channels are held as [d/2, 2] so that the RoPE
pairs are two halves of one tile.
One program per sequence leaves most SMs idle at small batches and walks 128 slots serially for
HCA: room for splitting channels across programs or pipelining the slot loads.
"""
import torch
import triton
import triton.language as tl

# DeepSeek V4 constants, not tunables (a tuple, so the offline tuner leaves them alone).
EPS, ROPE = 1e-6, 64
NUM_WARPS = 4

last_launch: dict = {}


@triton.jit
def _compress(kv_ptr, sc_ptr, w_ptr, cos_ptr, sin_ptr, o_ptr, S, s_b, s_s, eps,
              D: tl.constexpr, OVERLAP: tl.constexpr, ROPE: tl.constexpr):
    b = tl.program_id(0)
    pair = tl.arange(0, D // 2)
    offs = pair[:, None] * 2 + tl.arange(0, 2)[None, :]          # [D/2, 2] channel offsets
    m = tl.full([D // 2, 2], float("-inf"), tl.float32)
    l = tl.zeros([D // 2, 2], tl.float32)
    acc = tl.zeros([D // 2, 2], tl.float32)
    for s in range(S):
        col = 0
        if OVERLAP:
            # Slots 0..S/2-1: the previous window's first half of channels; then the own window's second half.
            col = tl.where(s < S // 2, 0, D)
        row = b.to(tl.int64) * s_b + s * s_s + col
        kv = tl.load(kv_ptr + row + offs)
        z = tl.load(sc_ptr + row + offs)
        m_new = tl.maximum(m, z)
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        p = tl.where(m_new == float("-inf"), 0.0, tl.exp(z - m_new))
        l = l * alpha + p
        acc = acc * alpha + p * kv
        m = m_new
    x = (acc / l).to(tl.bfloat16).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(tl.sum(x * x, axis=1), axis=0) / D + eps)
    w = tl.load(w_ptr + offs)
    y = (x * rstd * w).to(tl.bfloat16).to(tl.float32)
    a, bb = tl.split(y)
    r = pair - (D - ROPE) // 2
    is_rope = r >= 0
    c = tl.load(cos_ptr + b * (ROPE // 2) + r, mask=is_rope, other=1.0)
    sn = tl.load(sin_ptr + b * (ROPE // 2) + r, mask=is_rope, other=0.0)
    out = tl.join(a * c - bb * sn, a * sn + bb * c)
    tl.store(o_ptr + b * D + offs, out.to(o_ptr.dtype.element_ty))


def dsv4_compress(kv_state, score_state, norm_weight, cos, sin, overlap):
    kv_state, score_state = kv_state.contiguous(), score_state.contiguous()
    B, S, C = kv_state.shape
    d = C // 2 if overlap else C
    out = torch.empty(B, d, device=kv_state.device, dtype=torch.bfloat16)
    _compress[(B,)](kv_state, score_state, norm_weight.contiguous().float(), cos.contiguous(),
                    sin.contiguous(), out, S, kv_state.stride(0), kv_state.stride(1), EPS,
                    D=d, OVERLAP=bool(overlap), ROPE=ROPE, num_warps=NUM_WARPS)
    last_launch.update(grid=(B,), splits=1)
    return out

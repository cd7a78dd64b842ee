"""Shape-fitted: DeepSeek V4 HCA decode fitted to the GPU's listed shapes, where every sequence is
at least 4096 tokens long (min_ctx 4096 and up), so its 128-slot window is always full: the
baseline with the window_len mask dropped. Right on every GPU shape and on the interpreter's
long ones; wrong for a sequence in its first 128 tokens, which a serving engine decodes all the
time (the held-out draws' min_ctx goes down to 1, and the hard case puts sequences at pos 0-4).
In the interpreter its listed "short, partial window" shape catches it too; on "odd heads" alone,
only the held-out shapes and the hard case do.
Expect: heldout-incorrect | hard-case-incorrect
Task: dsv4_hca_decode
Device: cpu
Shapes: odd heads
Static: none
"""
import torch
import triton
import triton.language as tl

BLOCK_H = 16  # heads per program (tl.dot needs >= 16 rows)
BLOCK_N = 32  # keys per loop step
NUM_WARPS = 4  # warps of the partial kernel
WAVES = 2  # split the key axis until batch x splits x head blocks >= WAVES x SMs
# DeepSeek V4 constants, not tunables (a tuple, so the offline tuner leaves them alone).
D, ROPE, WINDOW = 512, 64, 128
SCALE = D ** -0.5

last_launch: dict = {}  # grid facts of the latest call, read by bench/dsv4.py


@triton.jit
def _dot(a, b):
    # fp32 operands (tf32 on the GPU, exact for bf16 values) rather than bf16: Triton 3.9's
    # interpreter multiplies bf16 dot operands as raw uint16 bits, and a kernel must be the same
    # code on the GPU and in the interpreter. bf16 operands would halve the registers on the GPU.
    return tl.dot(a.to(tl.float32), b.to(tl.float32))


@triton.jit
def _hca_partial(q_ptr, kvw_ptr, wlen_ptr, comp_ptr, nvis_ptr, po_ptr, pml_ptr,
                 H, n_entries, keys_per_split, nsplit, scale,
                 sq_b, sq_h, sw_b, sw_t, sc_b, sc_t,
                 W: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr):
    b = tl.program_id(0)
    split = tl.program_id(1)
    hb = tl.program_id(2)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < H
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + b * sq_b + heads[:, None] * sq_h + dims[None, :], mask=hmask[:, None], other=0.0)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    start = split * keys_per_split
    # This sequence's keys end at W + n_visible[b]: ragged batches skip their invisible tail.
    end = tl.minimum(start + keys_per_split, W + tl.load(nvis_ptr + b))
    for t0 in range(start, end, BLOCK_N):
        t = t0 + tl.arange(0, BLOCK_N)
        in_range = t < end
        is_win = t < W
        idx = t - W
        valid = in_range  # the window is always full: every listed GPU sequence is >= 4096 tokens
        # Two masked loads (one per source) rather than a select between pointers: each row is
        # read from exactly one place.
        win_rows = kvw_ptr + b.to(tl.int64) * sw_b + tl.where(is_win, t, 0).to(tl.int64) * sw_t
        comp_rows = comp_ptr + b.to(tl.int64) * sc_b + tl.maximum(idx, 0).to(tl.int64) * sc_t
        kv = tl.load(win_rows[:, None] + dims[None, :], mask=(valid & is_win)[:, None], other=0.0)
        kv += tl.load(comp_rows[:, None] + dims[None, :], mask=(valid & ~is_win)[:, None], other=0.0)
        s = _dot(q, tl.trans(kv)) * scale
        s = tl.where(valid[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
        # Rows that have seen only -inf keep alpha 0 and p 0 (exp(-inf - -inf) would be NaN).
        alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m_i - m_new))
        p = tl.where(m_new[:, None] == float("-inf"), 0.0, tl.exp(s - m_new[:, None]))
        l_i = l_i * alpha + tl.sum(p, axis=1)
        acc = acc * alpha[:, None] + _dot(p.to(kv.dtype), kv)
        m_i = m_new
    base = (b * H + heads) * nsplit + split
    tl.store(po_ptr + base[:, None] * D + dims[None, :], acc, mask=hmask[:, None])
    tl.store(pml_ptr + base * 2, m_i, mask=hmask)
    tl.store(pml_ptr + base * 2 + 1, l_i, mask=hmask)


@triton.jit
def _hca_combine(po_ptr, pml_ptr, sink_ptr, cos_ptr, sin_ptr, o_ptr, H, nsplit, so_b, so_h,
                 D: tl.constexpr, ROPE: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    sink = tl.load(sink_ptr + h)
    base = (b * H + h) * nsplit
    m_max = sink
    for s in range(nsplit):
        m_max = tl.maximum(m_max, tl.load(pml_ptr + (base + s) * 2))
    pair = tl.arange(0, D // 2)
    offs = pair[:, None] * 2 + tl.arange(0, 2)[None, :]  # [D/2, 2]: (even, odd) dims of each pair
    acc = tl.zeros([D // 2, 2], tl.float32)
    denom = tl.exp(sink - m_max)
    for s in range(nsplit):
        m_s = tl.load(pml_ptr + (base + s) * 2)
        l_s = tl.load(pml_ptr + (base + s) * 2 + 1)
        w = tl.where(m_s == float("-inf"), 0.0, tl.exp(m_s - m_max))
        denom += l_s * w
        acc += w * tl.load(po_ptr + (base + s) * D + offs)
    acc = acc / denom
    x, y = tl.split(acc)
    r = pair - (D - ROPE) // 2  # frequency index of the pair inside the RoPE slice
    is_rope = r >= 0
    c = tl.load(cos_ptr + b * (ROPE // 2) + r, mask=is_rope, other=1.0)
    sn = tl.load(sin_ptr + b * (ROPE // 2) + r, mask=is_rope, other=0.0)
    # Inverse RoPE: multiply the pair (x + iy) by conj(c + i sn).
    out = tl.join(x * c + y * sn, y * c - x * sn)
    tl.store(o_ptr + b * so_b + h * so_h + offs, out.to(o_ptr.dtype.element_ty))


def _num_sms(device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 132  # the interpreter: pretend to be an H200 so that the split logic is exercised


def dsv4_hca_decode(q, kv_window, window_len, comp_cache, n_visible, sinks, cos, sin):
    q, kv_window, comp_cache = q.contiguous(), kv_window.contiguous(), comp_cache.contiguous()
    n_visible, window_len = n_visible.contiguous(), window_len.contiguous()
    cos, sin, sinks = cos.contiguous(), sin.contiguous(), sinks.contiguous()
    B, H, d = q.shape
    assert d == D and kv_window.shape[1] == WINDOW
    n_entries = comp_cache.shape[1]  # the key axis: window slots, then every entry slot
    n_keys = WINDOW + n_entries
    n_blocks = triton.cdiv(n_keys, BLOCK_N)
    programs = B * triton.cdiv(H, BLOCK_H)
    nsplit = max(1, min(n_blocks, triton.cdiv(WAVES * _num_sms(q.device), programs)))
    keys_per_split = triton.cdiv(n_blocks, nsplit) * BLOCK_N
    nsplit = triton.cdiv(n_keys, keys_per_split)
    po = torch.empty(B, H, nsplit, D, device=q.device, dtype=torch.float32)
    pml = torch.empty(B, H, nsplit, 2, device=q.device, dtype=torch.float32)
    _hca_partial[(B, nsplit, triton.cdiv(H, BLOCK_H))](
        q, kv_window, window_len, comp_cache, n_visible, po, pml,
        H, n_entries, keys_per_split, nsplit, SCALE,
        q.stride(0), q.stride(1), kv_window.stride(0), kv_window.stride(1),
        comp_cache.stride(0), comp_cache.stride(1),
        W=WINDOW, D=D, BLOCK_H=BLOCK_H, BLOCK_N=BLOCK_N, num_warps=NUM_WARPS)
    o = torch.empty_like(q)
    _hca_combine[(B, H)](po, pml, sinks, cos, sin, o, H, nsplit, o.stride(0), o.stride(1),
                         D=D, ROPE=ROPE, num_warps=4)
    last_launch.update(grid=(B, nsplit, triton.cdiv(H, BLOCK_H)), splits=nsplit)
    return o

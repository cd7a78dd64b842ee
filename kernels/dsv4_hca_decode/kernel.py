"""Baseline HCA decode: flash-decoding in one or two Triton launches.

1. `_hca_partial`, grid (head blocks, splits, batch): each program walks its slice of the combined
   key axis [128 window slots | N128 compressed entries] in two loops (window rows, then the
   entries j < n_visible[b], contiguous rows: one masked load each, one pipelined buffer per loop), and
   keeps an online softmax over BLOCK_H heads at once (fp32 max/sum/accumulator, bf16 P into the
   P.V dot, as DeepSeek's kernel does). All 64 heads of Flash share one read of each KV row; Pro's
   128 heads are two head blocks, adjacent in the grid so the second read comes from L2. The key
   axis is split so that the grid covers the GPU about WAVES times even at batch 4.
   When batch x head blocks about fill the GPU alone (FUSE_AT; e.g. batch 128), there is one split and the same
   program finishes the heads (`_finish`): one launch, no partials.
2. `_hca_combine`, grid (batch, heads), only with splits: merges the splits' (max, sum, acc), adds the attention
   sink to the denominator, applies the inverse RoPE to the last 64 dims, writes bf16.

Configuration: BLOCK_H/BLOCK_N/NUM_WARPS/NUM_STAGES are the preferred point; the wrapper lowers
stages, then BLOCK_N, until its shared-memory estimate fits the device's opt-in limit and the
compiled kernel's shared memory does too (checked once per device, before any launch).

Simple on purpose: plain pointer loads (no TMA), a separate combine launch, one fixed head
blocking, the split count from a rule of thumb; the agent can pipeline the gathers, fuse the
combine, or split the value dims.
"""
import functools

import torch
import triton
import triton.language as tl

BLOCK_H = 64  # heads per program: Flash's 64 heads read each KV row once
BLOCK_N = 64  # keys per loop step
NUM_WARPS = 8  # warps of the partial kernel (two warpgroups: BLOCK_H x 512 fp32 acc in registers)
NUM_STAGES = 2  # software-pipeline depth wanted; lowered per device until it fits shared memory
WAVES = 2  # split the key axis until head blocks x splits x batch >= WAVES x SMs
FUSE_AT = 0.75  # no split (one launch, no partials) once batch x head blocks fill this share of the SMs
# DeepSeek V4 constants, not tunables (a tuple, so the offline tuner leaves them alone).
D, ROPE, WINDOW = 512, 64, 128
SCALE = D ** -0.5

last_launch: dict = {}  # grid facts of the latest call, read by bench/dsv4.py


@triton.jit
def _dot(a, b, BF16_DOT: tl.constexpr):
    # BF16_DOT (the GPU): bf16 operands, fp32 accumulation, the tensor cores' full rate. Otherwise
    # (the CPU interpreter) fp32 operands, exact for bf16 values: Triton 3.9's interpreter
    # multiplies bf16 dot operands as raw uint16 bits, so there the fp32 path is the correct one.
    if BF16_DOT:
        a = a.to(tl.bfloat16)
        b = b.to(tl.bfloat16)
    else:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b)


@triton.jit
def _attend(q, kv, valid, m_i, l_i, acc, scale, BF16_DOT: tl.constexpr):
    """One online-softmax step of BLOCK_H heads over BLOCK_N keys (rows of kv, masked by valid)."""
    s = _dot(q, tl.trans(kv), BF16_DOT) * scale
    s = tl.where(valid[None, :], s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    # Rows that have seen only -inf keep alpha 0 and p 0 (exp(-inf - -inf) would be NaN).
    alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m_i - m_new))
    p = tl.where(m_new[:, None] == float("-inf"), 0.0, tl.exp(s - m_new[:, None]))
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + _dot(p.to(tl.bfloat16), kv, BF16_DOT)
    return m_new, l_i, acc


@triton.jit
def _finish(acc, m_i, l_i, heads, hmask, b, sink_ptr, cos_ptr, sin_ptr, o_ptr, so_b, so_h,
            D: tl.constexpr, ROPE: tl.constexpr, BLOCK_H: tl.constexpr):
    """The combine's epilogue for a program that saw the whole key axis (one split): add the
    sink to the denominator, normalise, inverse RoPE on the last 64 dims, write bf16."""
    sink = tl.load(sink_ptr + heads, mask=hmask, other=0.0)
    m_max = tl.maximum(m_i, sink)
    w = tl.where(m_i == float("-inf"), 0.0, tl.exp(m_i - m_max))
    acc = acc * (w / (l_i * w + tl.exp(sink - m_max)))[:, None]
    x, y = tl.split(tl.reshape(acc, [BLOCK_H, D // 2, 2]))  # (even, odd) dims of each pair
    pair = tl.arange(0, D // 2)
    r = pair - (D - ROPE) // 2  # frequency index of the pair inside the RoPE slice
    is_rope = r >= 0
    c = tl.load(cos_ptr + b * (ROPE // 2) + r, mask=is_rope, other=1.0)[None, :]
    sn = tl.load(sin_ptr + b * (ROPE // 2) + r, mask=is_rope, other=0.0)[None, :]
    out = tl.join(x * c + y * sn, y * c - x * sn)  # times conj(c + i sn)
    offs = pair[:, None] * 2 + tl.arange(0, 2)[None, :]
    tl.store(o_ptr + b * so_b + heads[:, None, None] * so_h + offs[None, :, :], out.to(o_ptr.dtype.element_ty),
             mask=hmask[:, None, None])


@triton.jit
def _hca_partial(q_ptr, kvw_ptr, wlen_ptr, comp_ptr, nvis_ptr, po_ptr, pml_ptr, sink_ptr, cos_ptr, sin_ptr, o_ptr,
                 H, keys_per_split, nsplit, scale,
                 sq_b, sq_h, sw_b, sw_t, sc_b, sc_t,
                 W: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                 BF16_DOT: tl.constexpr,
                 so_b=0, so_h=0, ROPE: tl.constexpr = 64, FUSED: tl.constexpr = False):
    hb = tl.program_id(0)
    split = tl.program_id(1)
    b = tl.program_id(2)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < H
    dims = tl.arange(0, D)
    q = tl.load(q_ptr + b * sq_b + heads[:, None] * sq_h + dims[None, :], mask=hmask[:, None], other=0.0)
    wlen = tl.load(wlen_ptr + b)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D], tl.float32)
    start = split * keys_per_split
    # This sequence's keys end at W + n_visible[b]: ragged batches skip their invisible tail.
    end = tl.minimum(start + keys_per_split, W + tl.load(nvis_ptr + b))
    win_base = kvw_ptr + b.to(tl.int64) * sw_b
    for t0 in range(start, tl.minimum(end, W), BLOCK_N):  # window slots t < W
        t = t0 + tl.arange(0, BLOCK_N)
        valid = (t < wlen) & (t < end)
        kv = tl.load(win_base + t[:, None].to(tl.int64) * sw_t + dims[None, :], mask=valid[:, None], other=0.0)
        m_i, l_i, acc = _attend(q, kv, valid, m_i, l_i, acc, scale, BF16_DOT)
    comp_base = comp_ptr + b.to(tl.int64) * sc_b
    for t0 in range(tl.maximum(start, W), end, BLOCK_N):  # entries j = t - W < n_visible[b]
        t = t0 + tl.arange(0, BLOCK_N)
        valid = t < end
        rows = comp_base + (t - W).to(tl.int64) * sc_t
        kv = tl.load(rows[:, None] + dims[None, :], mask=valid[:, None], other=0.0)
        m_i, l_i, acc = _attend(q, kv, valid, m_i, l_i, acc, scale, BF16_DOT)
    if FUSED:  # one split: finish here, no partials and no combine launch
        _finish(acc, m_i, l_i, heads, hmask, b, sink_ptr, cos_ptr, sin_ptr, o_ptr, so_b, so_h, D, ROPE, BLOCK_H)
    else:
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


@functools.lru_cache(maxsize=None)
def _device(device: torch.device):
    """(SM count, opt-in shared memory per block in bytes), once per device."""
    if device.type != "cuda":
        return 132, 1 << 30  # the interpreter: an H200's SMs (the split logic runs), no smem limit
    p = torch.cuda.get_device_properties(device)
    smem = p.shared_memory_per_block_optin  # torch >= 2.2 reports the opt-in limit (232448 on an H200)
    return p.multi_processor_count, smem


def _smem_bytes(block_h, block_n, stages):
    # Pipelined KV tiles (bf16 rows), q (a dot operand kept in shared memory), P, and reduction
    # scratch: an estimate, to skip hopeless points; the compiled kernel's figure decides.
    return stages * block_n * D * 2 + block_h * D * 2 + block_h * block_n * 4 + 8192


def _candidates(smem):
    """Configurations to try, preferred first: the knobs, then fewer stages, then smaller BLOCK_N."""
    out = []
    bn = BLOCK_N
    while bn >= 16:
        for st in range(NUM_STAGES, 0, -1):
            if _smem_bytes(BLOCK_H, bn, st) <= smem:
                out.append((BLOCK_H, bn, NUM_WARPS, st))
        bn //= 2
    return out or [(BLOCK_H, 16, NUM_WARPS, 1)]


def _shared_bytes(compiled) -> int:
    # Triton >= 3 keeps it in .metadata.shared, 2.x in .shared.
    return getattr(getattr(compiled, "metadata", compiled), "shared", 0)


_chosen: dict = {}  # (device, knobs) -> the configuration that compiled there
_workspace: dict = {}  # (device, B, H, nsplit) -> (partial acc, partial max/sum), reused across calls


def _as_rows(x):
    return x if x.stride(-1) == 1 else x.contiguous()


def dsv4_hca_decode(q, kv_window, window_len, comp_cache, n_visible, sinks, cos, sin):
    # Only the innermost dim must be dense: other strides go to the kernel (no copies per call).
    q, kv_window, comp_cache = _as_rows(q), _as_rows(kv_window), _as_rows(comp_cache)
    if not all(x.is_contiguous() for x in (window_len, n_visible, sinks, cos, sin)):
        window_len, n_visible, sinks, cos, sin = (x.contiguous() for x in (window_len, n_visible, sinks, cos, sin))
    B, H, d = q.shape
    assert d == D and kv_window.shape[1] == WINDOW
    dev = q.device
    n_sms, smem = _device(dev)
    # About a full wave of programs without splitting the key axis: one split, finished in the
    # same launch (no fp32 partials through HBM, no combine launch); else split to cover WAVES x SMs.
    fused = B * triton.cdiv(H, BLOCK_H) >= FUSE_AT * n_sms
    key = (dev, BLOCK_H, BLOCK_N, NUM_WARPS, NUM_STAGES, fused)
    chosen = _chosen.get(key)
    n_keys = WINDOW + comp_cache.shape[1]  # the key axis: window slots, then every entry slot
    o = torch.empty_like(q)
    for bh, bn, warps, stages in [chosen] if chosen else _candidates(smem):
        n_hb = triton.cdiv(H, bh)
        n_blocks = triton.cdiv(n_keys, bn)
        nsplit = 1 if fused else max(1, min(n_blocks, triton.cdiv(WAVES * n_sms, B * n_hb)))
        keys_per_split = triton.cdiv(n_blocks, nsplit) * bn
        nsplit = triton.cdiv(n_keys, keys_per_split)
        ws = _workspace.get((dev, B, H, nsplit))
        if ws is None and fused:
            ws = (o, o)  # not written: the fused epilogue writes o directly
        elif ws is None:
            ws = _workspace[(dev, B, H, nsplit)] = (
                torch.empty(B, H, nsplit, D, device=dev, dtype=torch.float32),
                torch.empty(B, H, nsplit, 2, device=dev, dtype=torch.float32))
        po, pml = ws
        args = (q, kv_window, window_len, comp_cache, n_visible, po, pml, sinks, cos, sin, o, H,
                keys_per_split, nsplit, SCALE, q.stride(0), q.stride(1), kv_window.stride(0),
                kv_window.stride(1), comp_cache.stride(0), comp_cache.stride(1))
        meta = dict(W=WINDOW, D=D, BLOCK_H=bh, BLOCK_N=bn, BF16_DOT=q.is_cuda,
                    so_b=o.stride(0), so_h=o.stride(1), ROPE=ROPE, FUSED=fused,
                    num_warps=warps, num_stages=stages)
        # Compiled first and its shared memory compared with the device's limit: a configuration
        # that does not fit is skipped, never launched into OutOfResources (once per device).
        if chosen or not q.is_cuda or _shared_bytes(_hca_partial.warmup(*args, grid=(1,), **meta)) <= smem:
            break
    _chosen[key] = (bh, bn, warps, stages)
    _hca_partial[(n_hb, nsplit, B)](*args, **meta)
    if not fused:
        _hca_combine[(B, H)](po, pml, sinks, cos, sin, o, H, nsplit, o.stride(0), o.stride(1),
                             D=D, ROPE=ROPE, num_warps=4)
    last_launch.update(grid=(n_hb, nsplit, B), splits=nsplit, fused=fused,
                       config=dict(BLOCK_H=bh, BLOCK_N=bn, NUM_WARPS=warps, NUM_STAGES=stages))
    return o

"""Baseline CSA sparse decode: flash-decoding in one or two Triton launches.

1. `_csa_partial`, grid (head blocks, splits, batch): each program walks its slice of the combined
   key axis [128 window slots | topk selected entries] in ONE loop (a block of BLOCK_N keys is
   either window rows or gathered comp_cache[indices] rows, 1 KiB each, contiguous: one pipelined
   load per step, one software pipeline for the whole axis), and keeps an online softmax over
   BLOCK_H heads at once (fp32 max/sum, the fp32 accumulator fed to the P.V dot as its
   accumulator, bf16 P as DeepSeek's kernel does). BLOCK_H 64 is one wgmma M tile; all 64 heads of
   Flash share one read of each KV row; Pro's 128 heads are two head blocks, adjacent in the grid
   so the second read comes from L2.
   Split count (SPLITS 0 = automatic): batch x head blocks programs alone use at most the SMs
   once; the key axis is split into as many slices as still fit in WAVES x SMs programs, each at
   least MIN_SPLIT_KEYS keys long, since a split writes 2 KiB of fp32 partials per head (the same
   order as the 1 KiB a key it reads) and the combine reads them back.
   With one split the same program finishes (`_finish`): one launch, no partials. Its inverse
   RoPE goes through a small fp32 scratch row per head (store, CTA barrier, reload the pairs as
   two strided tiles), not a reshape/split/join of the [BLOCK_H, 512] accumulator in registers.
2. `_csa_combine`, grid (batch, heads), only with splits: merges the splits' (max, sum, acc)
   COMBINE_SPLITS at a time (their loads in flight together), adds the attention sink to the
   denominator, applies the inverse RoPE to the last 64 dims, writes bf16.

Configuration: BLOCK_H/BLOCK_N/NUM_WARPS/NUM_STAGES are the preferred point; the wrapper lowers
stages, then BLOCK_N, until its shared-memory estimate fits the device's opt-in limit and the
compiled kernel's shared memory does too (checked once per device, before any launch).

Known cost (sm_90a, Triton 3.9): Triton gives the first dot of a chained pair all 8 warps along M
(`warpsPerTileV3`), so at BLOCK_H 64 both warpgroups compute the same S = QK^T: it costs twice.

Simple on purpose: plain pointer gathers (no TMA), no warp specialisation, a separate combine
launch; the agent can pipeline the gathers, fuse the combine, or split the value dims.
"""
import functools

import torch
import triton
import triton.language as tl

BLOCK_H = 64  # heads per program: one wgmma M tile; Flash's 64 heads read each KV row once
BLOCK_N = 64  # keys per loop step: a step's fixed cost is most of it (bench/dsv4_knockout.py on the H200: 32 -> 64 took
# flash 8k x128 from 102 to 78 us, pro 8k x128 from 309 to 220 us; 128 spills; 16 warps were slower)
NUM_WARPS = 8  # warps of the partial kernel (two warpgroups: BLOCK_H x 512 fp32 acc in registers)
NUM_STAGES = 2  # software-pipeline depth asked of Triton; lowered per device until it fits shared memory
SPLITS = 0  # 0: automatic (below); n > 0: exactly min(n, key blocks) splits (1 = one launch, no combine)
WAVES = 1  # automatic splits: at most WAVES x SMs programs in all
MIN_SPLIT_KEYS = 128  # automatic splits: no split shorter than this many keys
COMBINE_SPLITS = 16  # splits the combine merges per step (loads in flight together)
WARP_SPEC = 0  # 1: the key loop as tl.range(warp_specialize=True), Triton's automatic warp specialisation
# (Triton 3.9 on sm_90a compiles the same kernel with or without it; kept for newer Tritons and Blackwell)
# The tuner's space (docs/tuner.md), bounded by what the H200 and ptxas showed (BLOCK_N 128 spilled, 16 warps were slower) and by
# registers: the fp32 accumulator, BLOCK_H x 512 over the threads, at most half of a thread's 255.
# Shared memory is not declared: the wrapper compiles first and fits the stages and tile to the GPU
# it runs on (_candidates; a proposal it had to shrink is the smaller configuration's time).
# warpsmith: tune BLOCK_H in [32, 64]
# warpsmith: tune BLOCK_N in [16, 32, 64]
# warpsmith: tune NUM_WARPS in [4, 8]
# warpsmith: tune NUM_STAGES in [1, 2, 3]
# warpsmith: tune WAVES in [1, 2, 4]
# warpsmith: require BLOCK_H * 512 // (32 * NUM_WARPS) <= 128
# The split heuristics and the combine's launch, near their values (undeclared, the tuner's ladder
# would try 32-512 keys a split and a 1- to 16-warp combine):
# warpsmith: tune MIN_SPLIT_KEYS in [64, 128, 256]
# warpsmith: tune COMBINE_SPLITS in [16, 32]
# warpsmith: tune num_warps in [2, 4, 8]
# DeepSeek V4 constants, not tunables (a tuple, so the offline tuner leaves them alone).
D, ROPE, WINDOW = 512, 64, 128
SCALE = D ** -0.5

last_launch: dict = {}  # grid facts of the latest call, read by bench/dsv4.py


@triton.jit
def _attend(q, kv, valid, m_i, l_i, acc, scale, BF16_DOT: tl.constexpr):
    """One online-softmax step of BLOCK_H heads over BLOCK_N keys (rows of kv, masked by valid).
    BF16_DOT (the GPU): bf16 operands, fp32 accumulation, the tensor cores' full rate. Otherwise
    (the CPU interpreter) fp32 operands, exact for bf16 values: Triton 3.9's interpreter
    multiplies bf16 dot operands as raw uint16 bits, so there the fp32 path is the correct one."""
    if BF16_DOT:
        s = tl.dot(q, tl.trans(kv))
    else:
        s = tl.dot(q.to(tl.float32), tl.trans(kv.to(tl.float32)))
    s = tl.where(valid[None, :], s * scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    # Rows that have seen only -inf keep alpha 0 and p 0 (exp(-inf - -inf) would be NaN).
    alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m_i - m_new))
    p = tl.where(m_new[:, None] == float("-inf"), 0.0, tl.exp(s - m_new[:, None]))
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None]
    # The accumulator goes into the dot (wgmma accumulates in place): no second [BLOCK_H, 512]
    # fp32 temporary in registers.
    if BF16_DOT:
        acc = tl.dot(p.to(tl.bfloat16), kv, acc)
    else:
        acc = tl.dot(p.to(tl.bfloat16).to(tl.float32), kv.to(tl.float32), acc)
    return m_new, l_i, acc


@triton.jit
def _finish(acc, m_i, l_i, heads, hmask, b, H, sink_ptr, cos_ptr, sin_ptr, o_ptr, rs_ptr, so_b, so_h,
            D: tl.constexpr, ROPE: tl.constexpr):
    """The combine's epilogue for a program that saw the whole key axis (one split): add the
    sink to the denominator, normalise, write the 448 plain dims as bf16; the 64 RoPE dims go
    to an fp32 scratch row, come back as (even, odd) tiles after a CTA barrier, are de-rotated
    and written. No layout shuffle of the [BLOCK_H, 512] accumulator."""
    sink = tl.load(sink_ptr + heads, mask=hmask, other=0.0)
    m_max = tl.maximum(m_i, sink)
    w = tl.where(m_i == float("-inf"), 0.0, tl.exp(m_i - m_max))
    acc = acc * (w / (l_i * w + tl.exp(sink - m_max)))[:, None]
    dims = tl.arange(0, D)
    is_rope = dims >= D - ROPE
    out_rows = o_ptr + b * so_b + heads * so_h
    tl.store(out_rows[:, None] + dims[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=hmask[:, None] & ~is_rope[None, :])
    rs_rows = rs_ptr + (b * H + heads).to(tl.int64) * ROPE
    tl.store(rs_rows[:, None] + (dims - (D - ROPE))[None, :], acc, mask=hmask[:, None] & is_rope[None, :])
    tl.debug_barrier()  # the CTA's scratch stores are visible to all its threads after this
    i = tl.arange(0, ROPE // 2)
    # .cg: read from L2, where the stores went (never a stale L1 line).
    x = tl.load(rs_rows[:, None] + 2 * i[None, :], mask=hmask[:, None], other=0.0, cache_modifier=".cg")
    y = tl.load(rs_rows[:, None] + 2 * i[None, :] + 1, mask=hmask[:, None], other=0.0, cache_modifier=".cg")
    c = tl.load(cos_ptr + b * (ROPE // 2) + i)[None, :]
    sn = tl.load(sin_ptr + b * (ROPE // 2) + i)[None, :]
    dst = out_rows[:, None] + (D - ROPE) + 2 * i[None, :]
    # Inverse RoPE: (x + iy) times conj(c + i sn).
    tl.store(dst, (x * c + y * sn).to(o_ptr.dtype.element_ty), mask=hmask[:, None])
    tl.store(dst + 1, (y * c - x * sn).to(o_ptr.dtype.element_ty), mask=hmask[:, None])


@triton.jit
def _keys(t0, end, wlen, win_base, comp_base, idx_row, sw_t, sc_t, dims, W: tl.constexpr, BLOCK_N: tl.constexpr):
    """Keys t0 .. t0 + BLOCK_N of [window slots t < W | selected entries indices[t - W]]: their
    rows (1 KiB each, contiguous) and which of them count."""
    t = t0 + tl.arange(0, BLOCK_N)
    in_win = t < W
    idx = tl.load(idx_row + (t - W), mask=(t >= W) & (t < end), other=-1)
    valid = tl.where(in_win, t < wlen, idx >= 0) & (t < end)
    rows = tl.where(in_win, win_base + t.to(tl.int64) * sw_t, comp_base + tl.maximum(idx, 0).to(tl.int64) * sc_t)
    # Triton's alignment analysis loses the rows' 16-byte alignment through the select: restate it,
    # or the 1 KiB rows load element by element (no 16-byte vectors, no cp.async pipeline).
    rows = tl.multiple_of(rows, 16)
    return tl.load(rows[:, None] + dims[None, :], mask=valid[:, None], other=0.0), valid


@triton.jit
def _csa_partial(q_ptr, kvw_ptr, wlen_ptr, comp_ptr, idx_ptr, po_ptr, pml_ptr, sink_ptr, cos_ptr, sin_ptr, o_ptr,
                 rs_ptr, H, topk, keys_per_split, nsplit, scale,
                 sq_b, sq_h, sw_b, sw_t, sc_b, sc_t, si_b, so_b, so_h,
                 W: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                 BF16_DOT: tl.constexpr, WARP_SPEC: tl.constexpr, ROPE: tl.constexpr, FUSED: tl.constexpr):
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
    end = tl.minimum(start + keys_per_split, W + topk)
    win_base = kvw_ptr + b.to(tl.int64) * sw_b
    comp_base = comp_ptr + b.to(tl.int64) * sc_b
    # One loop over [window slots t < W | selected entries indices[t - W]]: one pipeline.
    if WARP_SPEC:
        for t0 in tl.range(start, end, BLOCK_N, warp_specialize=True):
            kv, valid = _keys(t0, end, wlen, win_base, comp_base, idx_ptr + b * si_b, sw_t, sc_t, dims, W, BLOCK_N)
            m_i, l_i, acc = _attend(q, kv, valid, m_i, l_i, acc, scale, BF16_DOT)
    else:
        for t0 in range(start, end, BLOCK_N):
            kv, valid = _keys(t0, end, wlen, win_base, comp_base, idx_ptr + b * si_b, sw_t, sc_t, dims, W, BLOCK_N)
            m_i, l_i, acc = _attend(q, kv, valid, m_i, l_i, acc, scale, BF16_DOT)
    if FUSED:  # one split: finish here, no partials and no combine launch
        _finish(acc, m_i, l_i, heads, hmask, b, H, sink_ptr, cos_ptr, sin_ptr, o_ptr, rs_ptr, so_b, so_h, D, ROPE)
    else:
        base = (b * H + heads) * nsplit + split
        tl.store(po_ptr + base[:, None].to(tl.int64) * D + dims[None, :], acc, mask=hmask[:, None])
        tl.store(pml_ptr + base * 2, m_i, mask=hmask)
        tl.store(pml_ptr + base * 2 + 1, l_i, mask=hmask)


@triton.jit
def _csa_combine(po_ptr, pml_ptr, sink_ptr, cos_ptr, sin_ptr, o_ptr, H, nsplit, so_b, so_h,
                 D: tl.constexpr, ROPE: tl.constexpr, SPLIT_P2: tl.constexpr, CS: tl.constexpr):
    b = tl.program_id(0)
    h = tl.program_id(1)
    sink = tl.load(sink_ptr + h)
    base = (b * H + h) * nsplit
    s_all = tl.arange(0, SPLIT_P2)
    m_all = tl.load(pml_ptr + (base + s_all) * 2, mask=s_all < nsplit, other=float("-inf"))
    l_all = tl.load(pml_ptr + (base + s_all) * 2 + 1, mask=s_all < nsplit, other=0.0)
    m_max = tl.maximum(tl.max(m_all, axis=0), sink)
    denom = tl.sum(l_all * tl.where(m_all == float("-inf"), 0.0, tl.exp(m_all - m_max)), axis=0) \
        + tl.exp(sink - m_max)
    pair = tl.arange(0, D // 2)
    offs = pair[:, None] * 2 + tl.arange(0, 2)[None, :]  # [D/2, 2]: (even, odd) dims of each pair
    acc = tl.zeros([D // 2, 2], tl.float32)
    for s0 in range(0, nsplit, CS):  # CS splits' partial rows in flight at once
        s = s0 + tl.arange(0, CS)
        live = s < nsplit
        m_s = tl.load(pml_ptr + (base + s) * 2, mask=live, other=float("-inf"))
        w = tl.where(m_s == float("-inf"), 0.0, tl.exp(m_s - m_max))
        part = tl.load(po_ptr + (base + s).to(tl.int64)[:, None, None] * D + offs[None, :, :],
                       mask=live[:, None, None], other=0.0)
        acc += tl.sum(w[:, None, None] * part, axis=0)
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


def _num_splits(n_keys, block_n, programs, n_sms):
    """Splits of the key axis: SPLITS if set, else as many as fit in WAVES x SMs programs with
    MIN_SPLIT_KEYS keys or more each (1 when batch x head blocks already fill the SMs)."""
    n_blocks = triton.cdiv(n_keys, block_n)
    if SPLITS > 0:
        want = SPLITS
    else:
        want = min(WAVES * n_sms // programs, n_keys // max(MIN_SPLIT_KEYS, 1))
    nsplit = max(1, min(want, n_blocks))
    keys_per_split = triton.cdiv(n_blocks, nsplit) * block_n
    return triton.cdiv(n_keys, keys_per_split), keys_per_split


_chosen: dict = {}  # (device, knobs) -> the configuration that compiled there
# (device, knobs) -> the compiled partial kernel (bench/dsv4_targets.py reads its registers and spills:
# the diagnostics live there, so that this file, which candidates copy, passes the static stage)
_compiled: dict = {}
_workspace: dict = {}  # (device, B, H, nsplit) -> partial acc + max/sum, or the fused path's RoPE scratch


def _as_rows(x):
    return x if x.stride(-1) == 1 else x.contiguous()


def _aligned_rows(x):
    """Dense rows that start on 16 bytes (the kernel promises the compiler 16-byte aligned KV rows,
    and reads FP8 scale words 8 bytes at a time): other strides are copied once, never misread."""
    x = _as_rows(x)
    row_bytes_ok = all(s * x.element_size() % 16 == 0 for s in x.stride()[:-1])
    return x if row_bytes_ok and x.data_ptr() % 16 == 0 else x.contiguous()


def dsv4_csa_decode(q, kv_window, window_len, comp_cache, indices, sinks, cos, sin):
    # Only the innermost dim must be dense: other strides go to the kernel (no copies per call).
    q, kv_window, comp_cache, indices = _as_rows(q), _aligned_rows(kv_window), _aligned_rows(comp_cache), _as_rows(indices)
    if not (window_len.is_contiguous() and sinks.is_contiguous() and cos.is_contiguous() and sin.is_contiguous()):
        window_len, sinks, cos, sin = (x.contiguous() for x in (window_len, sinks, cos, sin))
    B, H, d = q.shape
    assert d == D and kv_window.shape[1] == WINDOW
    dev = q.device
    n_sms, smem = _device(dev)
    topk = indices.shape[1]
    n_keys = WINDOW + topk
    o = torch.empty_like(q)
    # The fused and the split variant compile separately: each is checked against the device.
    one = _num_splits(n_keys, BLOCK_N, B * triton.cdiv(H, BLOCK_H), n_sms)[0] == 1
    key = (dev, BLOCK_H, BLOCK_N, NUM_WARPS, NUM_STAGES, WARP_SPEC, one)
    chosen = _chosen.get(key)
    for bh, bn, warps, stages in [chosen] if chosen else _candidates(smem):
        n_hb = triton.cdiv(H, bh)
        nsplit, keys_per_split = _num_splits(n_keys, bn, B * n_hb, n_sms)
        fused = nsplit == 1
        ws = _workspace.get((dev, B, H, nsplit))
        if ws is None:
            ws = _workspace[(dev, B, H, nsplit)] = (
                (torch.empty(B, H, ROPE, device=dev, dtype=torch.float32),) * 2 if fused else
                (torch.empty(B, H, nsplit, D, device=dev, dtype=torch.float32),
                 torch.empty(B, H, nsplit, 2, device=dev, dtype=torch.float32)))
        po, pml = ws
        args = (q, kv_window, window_len, comp_cache, indices, po, pml, sinks, cos, sin, o, po, H, topk,
                keys_per_split, nsplit, SCALE, q.stride(0), q.stride(1), kv_window.stride(0),
                kv_window.stride(1), comp_cache.stride(0), comp_cache.stride(1), indices.stride(0),
                o.stride(0), o.stride(1))
        meta = dict(W=WINDOW, D=D, BLOCK_H=bh, BLOCK_N=bn, BF16_DOT=q.is_cuda, WARP_SPEC=bool(WARP_SPEC), ROPE=ROPE, FUSED=fused,
                    num_warps=warps, num_stages=stages)
        # Compiled first and its shared memory compared with the device's limit: a configuration
        # that does not fit is skipped, never launched into OutOfResources (once per device).
        if chosen or not q.is_cuda:
            break
        compiled = _csa_partial.warmup(*args, grid=(1,), **meta)
        if _shared_bytes(compiled) <= smem:
            _compiled[key] = compiled
            break
    else:  # not even the smallest tile fits: say which knob to turn, not Triton's OutOfResources at launch
        raise RuntimeError(f"no configuration with BLOCK_H={bh}, NUM_WARPS={warps} fits this GPU's {smem} bytes of "
                           f"shared memory a block (BLOCK_N={bn}, {stages} stage needs {_shared_bytes(compiled)}): "
                           "lower BLOCK_H")
    _chosen[key] = (bh, bn, warps, stages)
    _csa_partial[(n_hb, nsplit, B)](*args, **meta)
    if not fused:
        _csa_combine[(B, H)](po, pml, sinks, cos, sin, o, H, nsplit, o.stride(0), o.stride(1),
                             D=D, ROPE=ROPE, SPLIT_P2=triton.next_power_of_2(nsplit),
                             CS=min(COMBINE_SPLITS, triton.next_power_of_2(nsplit)), num_warps=4)
    last_launch.update(grid=(n_hb, nsplit, B), splits=nsplit, fused=fused,
                       config=dict(BLOCK_H=bh, BLOCK_N=bn, NUM_WARPS=warps, NUM_STAGES=stages, WARP_SPEC=WARP_SPEC),
                       compiled=_compiled.get(key))
    return o

"""CSA sparse decode, value split: each program owns a head block and 1/VSPLIT of the 512 value dims.

Why: the baseline's [64 heads, 512] fp32 accumulator takes 255 registers a thread at 8 warps, so
an SM holds one program and a step's instruction stream runs with nothing to hide it (measured on
the H200: 7.5 cycles an issued instruction, DRAM 20% busy; packs/models/deepseek-v4/measured.md).
FlashMLA's decode kernel splits the same output into two 64 x 256 halves, one per warpgroup
("seesaw" scheduling, FLASHMLA-DEEP-DIVE in that file). Triton gives no control of warpgroups, so
this is the nearest structure it can express: VSPLIT programs per head block, each with a
[BLOCK_H, 512 / VSPLIT] accumulator, so that several programs fit on an SM at once and one's
softmax overlaps another's dots.

1. `_csa_vs_partial`, grid (head blocks x VSPLIT, splits, batch); program (hb, vp) walks its slice
   of [128 window slots | topk selected entries] as the baseline does (BLOCK_N keys a step, one
   pipelined loop, online softmax in fp32, bf16 P into the P.V dot), but:
   - the scores take the full 512-dim QK^T, as VSPLIT dots over [BLOCK_N, DV] column chunks of
     the key rows, its own chunk first (chunk vp, the value columns it accumulates), then the
     others in rotation (vp + 1, ...): the own chunk is the P.V dot's operand too, so a row's
     1 KiB is loaded once a program. The VSPLIT programs of a head block are adjacent in the
     grid: the second reads of a key row come from L2.
   - every program recomputes the same scores, so the softmax statistics agree across the value
     parts (up to the chunk order's rounding) and no merge between them is needed; each part is
     normalised by its own (max, sum), which is exact for its own P.
   With one key split the program finishes its DV dims (sink, normalisation; the part holding the
   last 64 dims de-rotates them through a small fp32 scratch row): one launch.
2. `_csa_vs_combine`, grid (batch, heads, VSPLIT), only with key splits: merges the key splits'
   (max, sum, acc) of one value part (each part keeps its own statistics), adds the sink, applies
   the inverse RoPE in the last part, writes bf16.

Cost: QK^T and the softmax run VSPLIT times per head block; the P.V dot and the accumulator's
rescale are split. Whether co-resident programs win that back is for the H200 to say
(bench/dsv4_targets.py --variant vsplit); not yet measured.

Configuration: BLOCK_H/BLOCK_N/NUM_WARPS/NUM_STAGES are the preferred point, lowered (stages, then
BLOCK_N) until the device's shared memory holds it, as the baseline does. Automatic key splits fill
WAVES x SMs programs (counting the value parts).
"""
import functools

import torch
import triton
import triton.language as tl

# Value parts per head block: 1 is the baseline's structure (one [BLOCK_H, 512] accumulator), 2
# FlashMLA's halves, 4 quarters (the QK^T and softmax work 4 times over).
# warpsmith: tune VSPLIT in [1, 2, 4]
# warpsmith: tune BLOCK_H in [32, 64]
# warpsmith: tune BLOCK_N in [16, 32, 64]
# warpsmith: tune NUM_WARPS in [4, 8]
# warpsmith: tune NUM_STAGES in [1, 2, 3]
# warpsmith: tune WAVES in [1, 2, 4]
# Pipelined key tiles (bf16 rows) and q, the QK^T dot's operand, live in shared memory.
# warpsmith: require NUM_STAGES * BLOCK_N * 1024 + BLOCK_H * 1024 <= smem_per_block
# The [BLOCK_H, 512 / VSPLIT] fp32 accumulator: at most half of a thread's 255 registers.
# warpsmith: require BLOCK_H * (512 // VSPLIT) // (32 * NUM_WARPS) <= 128
# Defaults: two programs an SM, as FlashMLA's two warpgroups. bench/sm90_report.py (sm_90a, Triton
# 3.9, no GPU): this point compiles to 250 registers a thread, no spills, 96 KiB of shared memory
# (q's 64 KiB + 2 stages x 16 keys), cp.async-pipelined key chunks: two programs fit an SM's
# registers (4 warps x 256) and its 228 KiB. BLOCK_N 32 x 2 stages takes 128 KiB (one an SM);
# VSPLIT 4 at 16 keys 168 registers. Not yet timed on a GPU.
VSPLIT = 2
BLOCK_H = 64  # heads per program: one wgmma M tile (one warpgroup's)
BLOCK_N = 16  # keys per loop step
NUM_WARPS = 4  # one warpgroup: a [64, 256] fp32 accumulator is 128 registers a thread
NUM_STAGES = 2  # software-pipeline depth asked of Triton; lowered per device until it fits shared memory
SPLITS = 0  # 0: automatic (below); n > 0: exactly min(n, key blocks) key splits (1 = one launch, no combine)
WAVES = 2  # automatic key splits: at most WAVES x SMs programs in all (two co-resident programs an SM)
MIN_SPLIT_KEYS = 128  # automatic key splits: no split shorter than this many keys
COMBINE_SPLITS = 16  # key splits the combine merges per step (loads in flight together)
# DeepSeek V4 constants, not tunables (a tuple, so the offline tuner leaves them alone).
D, ROPE, WINDOW = 512, 64, 128
SCALE = D ** -0.5

last_launch: dict = {}  # grid facts of the latest call, read by bench/dsv4_targets.py


@triton.jit
def _dot(a, b, acc, BF16_DOT: tl.constexpr):
    """a @ b + acc. BF16_DOT (the GPU): bf16 operands, fp32 accumulation. Otherwise (the CPU
    interpreter) fp32 operands, exact for bf16 values: Triton's interpreter multiplies bf16 dot
    operands as raw uint16 bits, so there the fp32 path is the correct one."""
    if BF16_DOT:
        return tl.dot(a, b, acc)
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)


@triton.jit
def _attend(q0, q1, q2, q3, k0, k1, k2, k3, valid, m_i, l_i, acc, scale, VSPLIT: tl.constexpr,
            BF16_DOT: tl.constexpr):
    """One online-softmax step of BLOCK_H heads over BLOCK_N keys given as VSPLIT column chunks
    (k0 the own value part, then the others; unused ones alias k0): scores over all 512 dims,
    the accumulator over the own DV."""
    s = _dot(q0, tl.trans(k0), tl.zeros([q0.shape[0], k0.shape[0]], tl.float32), BF16_DOT)
    if VSPLIT > 1:
        s = _dot(q1, tl.trans(k1), s, BF16_DOT)
    if VSPLIT > 2:
        s = _dot(q2, tl.trans(k2), s, BF16_DOT)
        s = _dot(q3, tl.trans(k3), s, BF16_DOT)
    s = tl.where(valid[None, :], s * scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    # Rows that have seen only -inf keep alpha 0 and p 0 (exp(-inf - -inf) would be NaN).
    alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m_i - m_new))
    p = tl.where(m_new[:, None] == float("-inf"), 0.0, tl.exp(s - m_new[:, None]))
    l_i = l_i * alpha + tl.sum(p, axis=1)
    # bf16 P, as DeepSeek's kernel; the accumulator goes into the dot (wgmma accumulates in place).
    acc = _dot(p.to(tl.bfloat16), k0, acc * alpha[:, None], BF16_DOT)
    return m_new, l_i, acc


@triton.jit
def _chunk(rows, c, dv, valid):
    """Columns c .. c + DV of the key rows: [BLOCK_N, DV], zeros where not valid."""
    # c is a multiple of DV (>= 128 elements) and rows are 16-byte aligned: restated, since the
    # compiler cannot see it through the program id, or the rows load element by element.
    base = tl.multiple_of(rows + c, 16)
    return tl.load(base[:, None] + dv[None, :], mask=valid[:, None], other=0.0)


@triton.jit
def _keys(t0, end, wlen, win_base, comp_base, idx_row, sw_t, sc_t, W: tl.constexpr, BLOCK_N: tl.constexpr):
    """Row pointers of keys t0 .. t0 + BLOCK_N of [window slots t < W | selected entries
    indices[t - W]] (1 KiB each, contiguous), and which of them count."""
    t = t0 + tl.arange(0, BLOCK_N)
    in_win = t < W
    idx = tl.load(idx_row + (t - W), mask=(t >= W) & (t < end), other=-1)
    valid = tl.where(in_win, t < wlen, idx >= 0) & (t < end)
    rows = tl.where(in_win, win_base + t.to(tl.int64) * sw_t, comp_base + tl.maximum(idx, 0).to(tl.int64) * sc_t)
    return tl.multiple_of(rows, 16), valid


@triton.jit
def _finish(acc, m_i, l_i, heads, hmask, b, H, vp, sink_ptr, cos_ptr, sin_ptr, o_ptr, rs_ptr, so_b, so_h,
            D: tl.constexpr, ROPE: tl.constexpr, DV: tl.constexpr, VSPLIT: tl.constexpr):
    """One value part of the heads, the whole key axis seen: add the sink to the denominator,
    normalise, write the plain dims as bf16; the last part's 64 RoPE dims go to an fp32 scratch
    row, come back as (even, odd) tiles after a CTA barrier, are de-rotated and written."""
    sink = tl.load(sink_ptr + heads, mask=hmask, other=0.0)
    m_max = tl.maximum(m_i, sink)
    w = tl.where(m_i == float("-inf"), 0.0, tl.exp(m_i - m_max))
    acc = acc * (w / (l_i * w + tl.exp(sink - m_max)))[:, None]
    dims = vp * DV + tl.arange(0, DV)
    is_rope = dims >= D - ROPE
    out_rows = o_ptr + b * so_b + heads * so_h
    tl.store(out_rows[:, None] + dims[None, :], acc.to(o_ptr.dtype.element_ty),
             mask=hmask[:, None] & ~is_rope[None, :])
    if vp == VSPLIT - 1:  # the RoPE dims are the last part's (DV >= 64)
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
def _csa_vs_partial(q_ptr, kvw_ptr, wlen_ptr, comp_ptr, idx_ptr, po_ptr, pml_ptr, sink_ptr, cos_ptr, sin_ptr, o_ptr,
                    rs_ptr, H, topk, keys_per_split, nsplit, scale,
                    sq_b, sq_h, sw_b, sw_t, sc_b, sc_t, si_b, so_b, so_h,
                    W: tl.constexpr, D: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_N: tl.constexpr,
                    VSPLIT: tl.constexpr, BF16_DOT: tl.constexpr, ROPE: tl.constexpr, FUSED: tl.constexpr):
    DV: tl.constexpr = D // VSPLIT
    hb = tl.program_id(0) // VSPLIT
    vp = tl.program_id(0) % VSPLIT  # the value part: adjacent programs share a head block's key rows
    split = tl.program_id(1)
    b = tl.program_id(2)
    heads = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = heads < H
    dv = tl.arange(0, DV)
    # Column chunks in the order the scores sum them: the own part first (its key chunk is the
    # P.V operand), then the others in rotation. Unused ones (VSPLIT < 4) alias c0.
    c0 = vp * DV
    c1 = ((vp + 1) % VSPLIT) * DV
    c2 = ((vp + 2) % VSPLIT) * DV
    c3 = ((vp + 3) % VSPLIT) * DV
    q_rows = q_ptr + b * sq_b + heads[:, None] * sq_h
    q0 = tl.load(q_rows + (c0 + dv)[None, :], mask=hmask[:, None], other=0.0)
    q1 = q0
    q2 = q0
    q3 = q0
    if VSPLIT > 1:
        q1 = tl.load(q_rows + (c1 + dv)[None, :], mask=hmask[:, None], other=0.0)
    if VSPLIT > 2:
        q2 = tl.load(q_rows + (c2 + dv)[None, :], mask=hmask[:, None], other=0.0)
        q3 = tl.load(q_rows + (c3 + dv)[None, :], mask=hmask[:, None], other=0.0)
    wlen = tl.load(wlen_ptr + b)
    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, DV], tl.float32)
    start = split * keys_per_split
    end = tl.minimum(start + keys_per_split, W + topk)
    win_base = kvw_ptr + b.to(tl.int64) * sw_b
    comp_base = comp_ptr + b.to(tl.int64) * sc_b
    idx_row = idx_ptr + b * si_b
    for t0 in range(start, end, BLOCK_N):
        rows, valid = _keys(t0, end, wlen, win_base, comp_base, idx_row, sw_t, sc_t, W, BLOCK_N)
        k0 = _chunk(rows, c0, dv, valid)
        k1 = k0
        k2 = k0
        k3 = k0
        if VSPLIT > 1:
            k1 = _chunk(rows, c1, dv, valid)
        if VSPLIT > 2:
            k2 = _chunk(rows, c2, dv, valid)
            k3 = _chunk(rows, c3, dv, valid)
        m_i, l_i, acc = _attend(q0, q1, q2, q3, k0, k1, k2, k3, valid, m_i, l_i, acc, scale, VSPLIT, BF16_DOT)
    if FUSED:  # one key split: finish here, no partials and no combine launch
        _finish(acc, m_i, l_i, heads, hmask, b, H, vp, sink_ptr, cos_ptr, sin_ptr, o_ptr, rs_ptr, so_b, so_h,
                D, ROPE, DV, VSPLIT)
    else:  # partials [B, H, VSPLIT, nsplit, DV] and their (max, sum) [B, H, VSPLIT, nsplit, 2]
        base = ((b * H + heads) * VSPLIT + vp) * nsplit + split
        tl.store(po_ptr + base[:, None].to(tl.int64) * DV + dv[None, :], acc, mask=hmask[:, None])
        tl.store(pml_ptr + base * 2, m_i, mask=hmask)
        tl.store(pml_ptr + base * 2 + 1, l_i, mask=hmask)


@triton.jit
def _csa_vs_combine(po_ptr, pml_ptr, sink_ptr, cos_ptr, sin_ptr, o_ptr, H, nsplit, so_b, so_h,
                    D: tl.constexpr, ROPE: tl.constexpr, VSPLIT: tl.constexpr, SPLIT_P2: tl.constexpr,
                    CS: tl.constexpr):
    DV: tl.constexpr = D // VSPLIT
    b = tl.program_id(0)
    h = tl.program_id(1)
    vp = tl.program_id(2)
    sink = tl.load(sink_ptr + h)
    base = ((b * H + h) * VSPLIT + vp) * nsplit
    s_all = tl.arange(0, SPLIT_P2)
    m_all = tl.load(pml_ptr + (base + s_all) * 2, mask=s_all < nsplit, other=float("-inf"))
    l_all = tl.load(pml_ptr + (base + s_all) * 2 + 1, mask=s_all < nsplit, other=0.0)
    m_max = tl.maximum(tl.max(m_all, axis=0), sink)
    denom = tl.sum(l_all * tl.where(m_all == float("-inf"), 0.0, tl.exp(m_all - m_max)), axis=0) \
        + tl.exp(sink - m_max)
    pair = tl.arange(0, DV // 2)
    offs = pair[:, None] * 2 + tl.arange(0, 2)[None, :]  # [DV/2, 2]: (even, odd) dims of each pair
    acc = tl.zeros([DV // 2, 2], tl.float32)
    for s0 in range(0, nsplit, CS):  # CS splits' partial rows in flight at once
        s = s0 + tl.arange(0, CS)
        live = s < nsplit
        m_s = tl.load(pml_ptr + (base + s) * 2, mask=live, other=float("-inf"))
        w = tl.where(m_s == float("-inf"), 0.0, tl.exp(m_s - m_max))
        part = tl.load(po_ptr + (base + s).to(tl.int64)[:, None, None] * DV + offs[None, :, :],
                       mask=live[:, None, None], other=0.0)
        acc += tl.sum(w[:, None, None] * part, axis=0)
    acc = acc / denom
    x, y = tl.split(acc)
    r = vp * (DV // 2) + pair - (D - ROPE) // 2  # frequency index of the pair inside the RoPE slice
    is_rope = r >= 0
    c = tl.load(cos_ptr + b * (ROPE // 2) + r, mask=is_rope, other=1.0)
    sn = tl.load(sin_ptr + b * (ROPE // 2) + r, mask=is_rope, other=0.0)
    # Inverse RoPE: multiply the pair (x + iy) by conj(c + i sn).
    out = tl.join(x * c + y * sn, y * c - x * sn)
    tl.store(o_ptr + b * so_b + h * so_h + vp * DV + offs, out.to(o_ptr.dtype.element_ty))


@functools.lru_cache(maxsize=None)
def _device(device: torch.device):
    """(SM count, opt-in shared memory per block in bytes), once per device."""
    if device.type != "cuda":
        return 132, 1 << 30  # the interpreter: an H200's SMs (the split logic runs), no smem limit
    p = torch.cuda.get_device_properties(device)
    return p.multi_processor_count, p.shared_memory_per_block_optin


def _smem_bytes(block_h, block_n, stages):
    # Pipelined key tiles (bf16 rows, all VSPLIT chunks), q (the QK^T operand), P, reduction
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
    """Key splits: SPLITS if set, else as many as fit in WAVES x SMs programs (programs counts the
    value parts) with MIN_SPLIT_KEYS keys or more each (1 when the programs already fill them)."""
    n_blocks = triton.cdiv(n_keys, block_n)
    if SPLITS > 0:
        want = SPLITS
    else:
        want = min(WAVES * n_sms // programs, n_keys // max(MIN_SPLIT_KEYS, 1))
    nsplit = max(1, min(want, n_blocks))
    keys_per_split = triton.cdiv(n_blocks, nsplit) * block_n
    return triton.cdiv(n_keys, keys_per_split), keys_per_split


_chosen: dict = {}  # (device, knobs) -> the configuration that compiled there
_compiled: dict = {}  # (device, knobs) -> the compiled partial kernel (bench/dsv4_targets.py reads its registers)
_workspace: dict = {}  # (device, B, H, VSPLIT, nsplit) -> partials + max/sum, or the fused path's RoPE scratch


def _as_rows(x):
    return x if x.stride(-1) == 1 else x.contiguous()


def _aligned_rows(x):
    """Dense rows that start on 16 bytes (the kernel promises the compiler 16-byte aligned KV rows):
    other strides are copied once, never misread."""
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
    assert VSPLIT in (1, 2, 4), "VSPLIT: 1, 2 or 4 value parts (the partial kernel sums at most 4 chunks)"
    dev = q.device
    n_sms, smem = _device(dev)
    topk = indices.shape[1]
    n_keys = WINDOW + topk
    o = torch.empty_like(q)
    # The fused and the split variant compile separately: each is checked against the device.
    one = _num_splits(n_keys, BLOCK_N, B * triton.cdiv(H, BLOCK_H) * VSPLIT, n_sms)[0] == 1
    key = (dev, VSPLIT, BLOCK_H, BLOCK_N, NUM_WARPS, NUM_STAGES, one)
    chosen = _chosen.get(key)
    for bh, bn, warps, stages in [chosen] if chosen else _candidates(smem):
        n_hb = triton.cdiv(H, bh)
        nsplit, keys_per_split = _num_splits(n_keys, bn, B * n_hb * VSPLIT, n_sms)
        fused = nsplit == 1
        ws = _workspace.get((dev, B, H, VSPLIT, nsplit))
        if ws is None:
            ws = _workspace[(dev, B, H, VSPLIT, nsplit)] = (
                (torch.empty(B, H, ROPE, device=dev, dtype=torch.float32),) * 2 if fused else
                (torch.empty(B, H, VSPLIT, nsplit, D // VSPLIT, device=dev, dtype=torch.float32),
                 torch.empty(B, H, VSPLIT, nsplit, 2, device=dev, dtype=torch.float32)))
        po, pml = ws
        args = (q, kv_window, window_len, comp_cache, indices, po, pml, sinks, cos, sin, o, po, H, topk,
                keys_per_split, nsplit, SCALE, q.stride(0), q.stride(1), kv_window.stride(0),
                kv_window.stride(1), comp_cache.stride(0), comp_cache.stride(1), indices.stride(0),
                o.stride(0), o.stride(1))
        meta = dict(W=WINDOW, D=D, BLOCK_H=bh, BLOCK_N=bn, VSPLIT=VSPLIT, BF16_DOT=q.is_cuda, ROPE=ROPE,
                    FUSED=fused, num_warps=warps, num_stages=stages)
        # Compiled first and its shared memory compared with the device's limit: a configuration
        # that does not fit is skipped, never launched into OutOfResources (once per device).
        if chosen or not q.is_cuda:
            break
        compiled = _csa_vs_partial.warmup(*args, grid=(1,), **meta)
        if _shared_bytes(compiled) <= smem:
            _compiled[key] = compiled
            break
    else:  # not even the smallest tile fits: say which knob to turn, not Triton's OutOfResources at launch
        raise RuntimeError(f"no configuration with BLOCK_H={bh}, NUM_WARPS={warps} fits this GPU's {smem} bytes of "
                           f"shared memory a block (BLOCK_N={bn}, {stages} stage needs {_shared_bytes(compiled)}): "
                           "lower BLOCK_H")
    _chosen[key] = (bh, bn, warps, stages)
    _csa_vs_partial[(n_hb * VSPLIT, nsplit, B)](*args, **meta)
    if not fused:
        _csa_vs_combine[(B, H, VSPLIT)](po, pml, sinks, cos, sin, o, H, nsplit, o.stride(0), o.stride(1),
                                        D=D, ROPE=ROPE, VSPLIT=VSPLIT, SPLIT_P2=triton.next_power_of_2(nsplit),
                                        CS=min(COMBINE_SPLITS, triton.next_power_of_2(nsplit)), num_warps=4)
    last_launch.update(grid=(n_hb * VSPLIT, nsplit, B), splits=nsplit, fused=fused,
                       config=dict(VSPLIT=VSPLIT, BLOCK_H=bh, BLOCK_N=bn, NUM_WARPS=warps, NUM_STAGES=stages),
                       compiled=_compiled.get(key))
    return o

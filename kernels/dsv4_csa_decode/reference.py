"""DeepSeek V4 CSA sparse decode: one new token per sequence attends to its sliding window plus
the top-k compressed (ratio 4) entries chosen by the lightning indexer; shared-KV MQA, per-head
attention sink in the denominator, inverse RoPE on the output's last 64 dims.

Sources (DeepSeek's own inference code, read in two public verbatim copies; cited by function):
- DS  = deepseek-ai/DeepSeek-V4-{Flash,Pro} `inference/model.py`, as copied in
  github.com/Nicooo-Wang/DeepSeek-V4-Pro-code @ 0ec3a03 and Mockingjay1316/deepseek-v4-flash-spark.
  `Attention.forward` (decode branch): the window ring buffer `kv_cache[:bsz, start_pos % win] = kv`
  is written BEFORE `sparse_attn`, so the window holds positions pos-127..pos including the current
  token; `get_window_topk_idxs` gives slots 0..pos (rest -1) until pos >= 127, then all 128;
  compressed indices come from `Indexer.forward` (+128 offset into the combined cache); after
  attention `apply_rotary_emb(o[..., -rd:], freqs_cis, True)` de-rotates the output at the query
  position (conj of e^{i theta pos}); softmax_scale = head_dim**-0.5 = 512**-0.5.
- DSK = `inference/kernel.py` `sparse_attn_kernel` (TileLang; Mockingjay1316/deepseek-v4-flash-spark
  @ 1795ef7): fp32 scores/max/sum, P cast to bf16 (`acc_s_cast`) before P.V, -1 indices skipped,
  the sink added once after the loop: `sum_exp += exp(attn_sink - scores_max)`, i.e. a logit with a
  zero value, not multiplied by the softmax scale. Output bf16.
- RoPE (DS `apply_rotary_emb`, `precompute_freqs_cis`): interleaved pairs (x[2i], x[2i+1]) of the
  last 64 dims, complex multiply by e^{i theta_i pos}; compressed layers use compress_rope_theta
  160000 with YaRN (factor 16, original_seq_len 65536, beta_fast 32, beta_slow 1; config.json of
  deepseek-v4-flash-spark @ 1795ef7), no mscale.

Task signature (all per decode step, B sequences at ragged positions pos[b]):
  q          bf16 [B, H, 512]   query after per-head RMSNorm and RoPE at pos[b]
  kv_window  bf16 [B, 128, 512] ring buffer; slots >= window_len[b] hold garbage
  window_len i32  [B]           min(pos+1, 128)
  comp_cache bf16 [B, N4, 512]  compressed entries (entry j roped at 4j); j >= (pos+1)//4 garbage
  indices    i32  [B, topk]     entry indices into comp_cache (NO +128 offset), -1 = skip
  sinks      f32  [H]
  cos, sin   f32  [B, 32]       e^{i theta pos[b]} for the output's inverse RoPE
-> bf16 [B, H, 512]
The reference does fp32 math throughout (DS's pure-torch `sparse_attn` does the same); the
tolerance admits the real kernel's bf16 P (a test checks that).
"""
import hashlib
import math

import torch

D = 512
ROPE = 64
WINDOW = 128
RATIO = 4
SCALE = D ** -0.5

# compress_rope_theta and YaRN parameters of both V4 checkpoints' config.json.
ROPE_BASE = 160000.0
YARN_FACTOR = 16.0
YARN_ORIG = 65536
BETA_FAST, BETA_SLOW = 32, 1


def rope_freqs() -> torch.Tensor:
    """theta_i (fp64 [32]) as DS `precompute_freqs_cis` computes them for compressed layers."""
    dim, base = ROPE, ROPE_BASE

    def corr_dim(n_rot):
        return dim * math.log(YARN_ORIG / (n_rot * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(corr_dim(BETA_FAST)), 0)
    high = min(math.ceil(corr_dim(BETA_SLOW)), dim - 1)
    if low == high:
        high += 0.001
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    smooth = 1 - ramp
    return freqs / YARN_FACTOR * (1 - smooth) + freqs * smooth


def rope_cos_sin(pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin fp32 [..., 32] at integer positions (angles in fp64; DS uses fp32 angles, which at
    1M tokens differ by ~1e-2 rad: irrelevant here since inputs and reference share these)."""
    ang = pos.to(torch.float64).unsqueeze(-1) * rope_freqs().to(pos.device)
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate the last 64 dims of fp32 x [..., d] by e^{+-i theta pos}; cos/sin broadcast to [..., 32]."""
    x = x.clone()
    a, b = x[..., -ROPE::2], x[..., -ROPE + 1::2]
    s = -sin if inverse else sin
    x[..., -ROPE::2], x[..., -ROPE + 1::2] = a * cos - b * s, a * s + b * cos
    return x


def ragged_lengths(dims: dict, seed: int) -> torch.Tensor:
    """Sequence lengths (pos+1) spread evenly over [min_ctx, ctx], the longest exactly ctx, in a
    seed-dependent order: ragged, yet bytes_moved() knows the exact multiset."""
    B, ctx, lo = dims["batch"], dims["ctx"], min(dims.get("min_ctx", dims["ctx"]), dims["ctx"])
    lens = [lo + ((ctx - lo) * b) // max(B - 1, 1) for b in range(B)] if B > 1 else [ctx]
    perm = torch.randperm(B, generator=torch.Generator().manual_seed(seed + 7))
    return torch.tensor(lens, dtype=torch.int64)[perm]


def edge_lengths(dims: dict, seed: int) -> torch.Tensor:
    """Sequence lengths (pos+1) at the edges the model's masks have, cycled over the batch: the first
    tokens (pos 0-4: a window of 1-5 slots, no compressed entry yet), the first entries closing
    (4, 5, 8; 128, 129 for ratio 128), the window filling up (127, 128, 129), the second ratio-128
    entry (255-257), the top-k filling up (4*topk - 1, 4*topk, 4*topk + 4) and the longest, ctx."""
    B, ctx, topk = dims["batch"], dims["ctx"], dims.get("topk", 0)
    edges = [1, 2, 3, 4, 5, 8, 127, 128, 129, 255, 256, 257, ctx] + ([4 * topk - 1, 4 * topk, 4 * topk + 4] if topk else [])
    edges = sorted({e for e in edges if 1 <= e <= ctx})
    # The first sequence is always a first token and the second the longest, whatever the batch.
    first = [e for e in edges if e <= 5]
    rest = [e for e in edges if e > 5 and e != ctx] or [ctx]
    lens = [first[seed % len(first)], ctx] + [rest[(b + seed) % len(rest)] for b in range(max(B - 2, 0))]
    return torch.tensor(lens[:B], dtype=torch.int64)


# Inputs that test the contract (issue 17), checked on every candidate (correctness only): the
# harness passes the case's name as dims["case"] (harness.tasks.hard_cases).
HARD_CASES = {
    "first tokens and edges": "sequences at the positions where the masks change: the first tokens (partial "
                              "window, no compressed entry), the window and the entries filling up",
    "sinks ±30": "per-head sinks far above (+28..+38) or far below (-38..-28) every logit on alternate heads: "
                 "the sink takes nearly all of the softmax mass, or none of it",
}


def _rmsnormed(g: torch.Generator, shape, device) -> torch.Tensor:
    x = torch.randn(*shape, generator=g, device=device)
    gain = 0.5 + torch.rand(shape[-1], generator=g, device=device)  # kv_norm's learned weight
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gain


def _sub_seed(seed: int, tag: str) -> int:
    """A generator seed of its own for one part of a set: seed + k would draw another seed's q."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{tag}".encode(), digest_size=8).digest(), "little") >> 1


def _cache_into(comp: torch.Tensor, g: torch.Generator, gain: torch.Tensor, n_vis: torch.Tensor, pos_shift: int) -> None:
    """The compressed cache, in place in its dtype: N(0, 1) entries after RMSNorm with the gain (kv_norm's
    learned weight), entry j roped at position 4j, garbage (-50) from entry n_vis[b] on. Drawn and
    normalised in fp32 and then cast it moved ~5x the bytes, so here every pass reads and writes the
    dtype once and the row norms are taken in fp32 without a copy. The entries the indices name are
    then overwritten by _entry_rows (a timed batch's refill rewrites those alone)."""
    B, n4, d = comp.shape
    comp.normal_(generator=g)
    ms = torch.linalg.vector_norm(comp, dim=-1, keepdim=True, dtype=torch.float32).pow_(2).div_(d)
    comp.mul_(ms.add_(1e-6).rsqrt_())
    comp.mul_(gain)
    ce, se = rope_cos_sin(torch.arange(n4, device=comp.device) * RATIO + pos_shift)
    a, b = comp[..., -ROPE::2].float(), comp[..., -ROPE + 1::2].float()
    comp[..., -ROPE::2], comp[..., -ROPE + 1::2] = a * ce - b * se, a * se + b * ce
    # Garbage where nothing valid lives: a kernel that reads it fails loudly.
    comp.masked_fill_(torch.arange(n4, device=comp.device)[None, :, None] >= n_vis[:, None, None], -50.0)


def _entry_rows(g: torch.Generator, gain: torch.Tensor, idx: torch.Tensor, pos_shift: int, dtype) -> torch.Tensor:
    """The entries the indices name [B, topk, D] (rows of -1 slots too, never written): drawn per index
    slot, the same law as _cache_into's, entry j roped at position 4j."""
    rows = torch.randn(*idx.shape, D, generator=g, device=idx.device)
    rows.mul_(rows.pow(2).mean(-1, keepdim=True).add_(1e-6).rsqrt_()).mul_(gain)
    c, s = rope_cos_sin(idx.clamp(min=0).long() * RATIO + pos_shift)
    return apply_rope(rows, c, s).to(dtype)


def write_entry_rows(comp: torch.Tensor, idx: torch.Tensor, rows: torch.Tensor) -> None:
    """comp[b, idx[b, k]] = rows[b, k] where idx >= 0 (a sequence's indices are distinct)."""
    valid = idx >= 0
    seq = torch.arange(idx.shape[0], device=idx.device)[:, None].expand_as(idx)
    comp[seq[valid], idx[valid].long()] = rows[valid]


def build_inputs(dims, dtype, seed, device, pos_shift: int = 0, topk_override: int | None = None,
                 all_visible_indices: bool = False, lens: torch.Tensor | None = None, extreme_sinks: bool = False,
                 out: tuple | list | None = None, rows_only: bool = False, write_rows=write_entry_rows):
    """make_inputs with knobs for tests: pos_shift rotates every vector (q, window, entries, cos/sin)
    as if all positions moved by pos_shift; all_visible_indices selects every visible entry; lens
    replaces the ragged lengths; extreme_sinks moves the sinks to ±28..38 (alternate heads). With out
    (an earlier result of the same dims, dtype and device) the values are written into it: the same
    values, since a new set is made by writing into new tensors. With rows_only, of the compressed
    cache only the entries the new indices name are written (write_rows(comp, idx, rows) writes them;
    the FP8 task passes its own): what reference() and a kernel read of it, the rest is left as it was.

    The named entries are drawn per index slot from a generator of their own, apart from the rest of
    the cache (drawn whole, then overwritten there): a make and a rows-only refill of the same seed
    agree wherever a call reads. Every other input is drawn whole each time."""
    B, H, ctx = dims["batch"], dims["heads"], dims["ctx"]
    topk = topk_override or dims["topk"]
    n4 = ctx // RATIO
    if out is None:
        out = (torch.empty(B, H, D, dtype=dtype, device=device), torch.empty(B, WINDOW, D, dtype=dtype, device=device),
               torch.empty(B, dtype=torch.int32, device=device), torch.empty(B, n4, D, dtype=dtype, device=device),
               torch.empty(B, topk, dtype=torch.int32, device=device), torch.empty(H, device=device),
               torch.empty(B, ROPE // 2, device=device), torch.empty(B, ROPE // 2, device=device))
    q_out, win_out, wl_out, comp, idx, sinks_out, c_out, s_out = out
    lens = (ragged_lengths(dims, seed) if lens is None else lens).to(device)
    pos = lens - 1
    g = torch.Generator(device=device).manual_seed(seed)
    q = _rmsnormed(g, (B, H, D), device)
    q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + 1e-6)  # DS: unweighted per-head RMSNorm
    kv_win = _rmsnormed(g, (B, WINDOW, D), device)
    gain = 0.5 + torch.rand(D, generator=g, device=device)  # kv_norm's learned weight
    slot = torch.arange(WINDOW, device=device)
    slot_pos = pos[:, None] - torch.remainder(pos[:, None] - slot[None, :], WINDOW)  # position in slot s
    window_len = torch.clamp(lens, max=WINDOW)
    n_vis = lens // RATIO
    if not rows_only:
        _cache_into(comp, torch.Generator(device=device).manual_seed(_sub_seed(seed, "cache")), gain, n_vis, pos_shift)
    c, s = rope_cos_sin(pos + pos_shift)
    q = apply_rope(q, c[:, None], s[:, None])
    cw, sw = rope_cos_sin(slot_pos.clamp(min=0) + pos_shift)
    kv_win = apply_rope(kv_win, cw, sw)
    kv_win = torch.where((slot[None, :] < window_len[:, None])[..., None], kv_win, 50.0)
    # What the indexer chose, in no particular order: each sequence's first min(topk, visible) entries
    # in a random order of its visible ones (distinct random keys, the invisible last), every sequence
    # in one draw on the device. A randperm per sequence on the host waited on the device for each
    # count and took milliseconds a call at 1M tokens (a timed batch makes one input set a call).
    if all_visible_indices:
        assert bool((n_vis <= topk).all()), "all_visible_indices needs topk >= visible entries"
    gi = torch.Generator(device=device).manual_seed(seed + 1)
    keys = torch.randint(0, 2 ** 62, (B, n4), generator=gi, device=device)  # (ties: ~n4^2 / 2^63)
    keys.masked_fill_(torch.arange(n4, device=device)[None, :] >= n_vis[:, None], 2 ** 62)
    k = min(topk, n4)
    order = keys.topk(k, dim=1, largest=False).indices
    taken = torch.arange(k, device=device)[None, :] < torch.clamp(n_vis, max=topk)[:, None]
    idx.fill_(-1)
    idx[:, :k] = torch.where(taken, order, -1).to(torch.int32)
    gr = torch.Generator(device=device).manual_seed(_sub_seed(seed, "entries"))
    write_rows(comp, idx, _entry_rows(gr, gain, idx, pos_shift, comp.dtype if comp.is_floating_point() else dtype))
    sinks = (torch.rand(H, generator=g, device=device) * 10 - 2).float()
    if extreme_sinks:
        sinks = torch.where(torch.arange(H, device=device) % 2 == 0, 30.0 + sinks, -30.0 - sinks)
    for dst, src in ((q_out, q), (win_out, kv_win), (wl_out, window_len), (sinks_out, sinks), (c_out, c), (s_out, s)):
        dst.copy_(src)
    return tuple(out) if isinstance(out, tuple) else out


def _knobs(dims, seed):
    """build_inputs's knobs for a hard case (dims["case"]), {} for the plain inputs."""
    case = dims.get("case")
    if case == "first tokens and edges":
        return {"lens": edge_lengths(dims, seed)}
    if case == "sinks ±30":
        return {"extreme_sinks": True}
    if case is not None:
        raise ValueError(f"unknown hard case {case!r}")
    return {}


def make_inputs(dims, dtype, seed, device):
    return build_inputs(dims, dtype, seed, device, **_knobs(dims, seed))


# The compressed cache (argument 3: all but ~4% of a set's bytes at 64k tokens) is refilled only where
# a call reads it: the entries the new indices name (harness.tasks.check_fill checks reference() on a
# poisoned cache). A call's output depends on nothing else of it, and every entry it reads is new.
FILL_READS_ONLY = (3,)


def fill_inputs(xs, dims, seed):
    """make_inputs(dims, dtype, seed, device)'s values written into xs, an earlier make_inputs result of
    the same dims, dtype and device, wherever reference() reads them: the compressed cache only at the
    entries the new indices name (the harness refills a timed batch's inputs in place with it)."""
    build_inputs(dims, xs[0].dtype, seed, xs[0].device, out=xs, rows_only=True, **_knobs(dims, seed))
    return True


def reference(q, kv_window, window_len, comp_cache, indices, sinks, cos, sin):
    B, H, d = q.shape
    W = kv_window.shape[1]
    valid_c = indices >= 0
    gathered = torch.gather(comp_cache, 1, indices.clamp(min=0).long()[..., None].expand(-1, -1, d))
    kv = torch.cat([kv_window, gathered], dim=1).float()                     # [B, W+topk, d]
    valid = torch.cat([torch.arange(W, device=q.device)[None, :] < window_len[:, None], valid_c], dim=1)
    logits = torch.einsum("bhd,btd->bht", q.float(), kv) * SCALE
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    m = torch.maximum(logits.amax(-1), sinks[None, :])                       # sink joins the max
    p = torch.exp(logits - m[..., None])
    denom = p.sum(-1) + torch.exp(sinks[None, :] - m)
    o = torch.einsum("bht,btd->bhd", p, kv) / denom[..., None]
    o = apply_rope(o, cos[:, None], sin[:, None], inverse=True)
    return o.to(q.dtype)


def _lens(dims):
    return ragged_lengths(dims, 0).tolist()  # the multiset does not depend on the seed


def input_bytes(dims, dtype):
    """What make_inputs allocates: the whole compressed cache, of which a call reads only top-k rows."""
    es = torch.empty((), dtype=dtype).element_size()
    B, H, topk = dims["batch"], dims["heads"], dims["topk"]
    return (B * H * D + B * WINDOW * D + B * (dims["ctx"] // RATIO) * D) * es + B * topk * 4 + B * 4 + H * 4 + 2 * B * 32 * 4


def bytes_moved(dims, dtype):
    es = torch.empty((), dtype=dtype).element_size()
    B, H, topk = dims["batch"], dims["heads"], dims["topk"]
    rows = sum(min(L, WINDOW) + min(topk, L // RATIO) for L in _lens(dims))
    return (2 * B * H * D * es            # q in, o out
            + rows * D * es               # window rows + gathered entries, each read once
            + B * topk * 4 + B * 4        # indices, window_len
            + H * 4 + 2 * B * 32 * 4)     # sinks, cos, sin


def flops(dims):
    rows = sum(min(L, WINDOW) + min(dims["topk"], L // RATIO) for L in _lens(dims))
    return 4 * dims["heads"] * D * rows  # QK^T and PV

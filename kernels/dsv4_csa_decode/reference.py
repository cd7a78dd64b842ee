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
from collections import OrderedDict
from types import SimpleNamespace

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
    ang = pos.to(torch.float64).unsqueeze(-1) * _freqs_on(pos.device)
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate the last 64 dims of fp32 x [..., d] by e^{+-i theta pos}; cos/sin broadcast to [..., 32]."""
    x = x.clone()
    a, b = x[..., -ROPE::2], x[..., -ROPE + 1::2]
    s = -sin if inverse else sin
    x[..., -ROPE::2], x[..., -ROPE + 1::2] = a * cos - b * s, a * s + b * cos
    return x


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
# harness passes the case's name as dims["case"] (harness.authoring.tasks.hard_cases).
HARD_CASES = {
    "first tokens and edges": "sequences at the positions where the masks change: the first tokens (partial "
                              "window, no compressed entry), the window and the entries filling up",
    "sinks ±30": "per-head sinks far above (+28..+38) or far below (-38..-28) every logit on alternate heads: "
                 "the sink takes nearly all of the softmax mass, or none of it",
}


# ---- Making and refilling a set of inputs ------------------------------------------------------------
# A timed batch refills n sets in place, one fill_inputs call a set (harness/evaluate/child.py
# Child._refill), so a set is made for the host's sake: no synchronisation (no .item(), boolean-mask
# index, host tensor moved to the device or data-dependent shape) and ~20 launches. What no seed changes
# (the lengths' multiset, RoPE factors, garbage masks) is built once per shape and device (_kept); a
# seed draws on a device generator only. The sequences are made in the order of their lengths, where
# every length-dependent table is fixed, and a random permutation a set scatters them to their places.
# make_inputs runs the refill too (after drawing the whole compressed cache): both agree by construction.

_TABLES: OrderedDict = OrderedDict()    # key -> the seed-independent tables of a shape, the last few used
_FREQS: dict[str, torch.Tensor] = {}
_GENERATORS: dict[tuple[str, str], torch.Generator] = {}
EPS = 1e-6
# An int64 key per entry: 30 random bits above the entry's number (its low 32 bits, read back as an
# int32: x86 and NVIDIA GPUs are little-endian). A row's smallest keys are its visible entries in a random
# order, then invisible ones, whose low 32 bits all read -1.
_KEY_BITS = 30
_INVISIBLE = (1 << 62) + 0xFFFFFFFF


def _device(device) -> torch.device:
    d = torch.device(device)
    return torch.device("cuda", torch.cuda.current_device()) if d.type == "cuda" and d.index is None else d


def _freqs_on(device) -> torch.Tensor:
    key = str(_device(device))
    if key not in _FREQS:
        _FREQS[key] = rope_freqs().to(device)
    return _FREQS[key]


def _generator(device: torch.device, tag: str = "set") -> torch.Generator:
    """One generator per device and use, re-seeded for every set (making one is host work too)."""
    key = (str(device), tag)
    if key not in _GENERATORS:
        _GENERATORS[key] = torch.Generator(device=device)
    return _GENERATORS[key]


def _kept(key: tuple, build):
    """_TABLES[key], built on first use; the eight shapes used last are kept (a table can be 100s of MB)."""
    got = _TABLES.pop(key, None)
    _TABLES[key] = got if got is not None else build()
    while len(_TABLES) > 8:
        _TABLES.popitem(last=False)
    return _TABLES[key]


def spread_lengths(dims: dict) -> list[int]:
    """Sequence lengths (pos+1) spread evenly over [min_ctx, ctx], the longest exactly ctx, ascending: the
    multiset make_inputs deals out in a random order per seed (bytes_moved() knows it exactly)."""
    B, ctx, lo = dims["batch"], dims["ctx"], min(dims.get("min_ctx", dims["ctx"]), dims["ctx"])
    return [lo + ((ctx - lo) * b) // max(B - 1, 1) for b in range(B)] if B > 1 else [ctx]


def _sub_seed(seed: int, tag: str) -> int:
    """A generator seed of its own for one part of a set: seed + k would draw another seed's q."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{tag}".encode(), digest_size=8).digest(), "little") >> 1


def _build_tables(B: int, H: int, topk: int, ctx: int, lens: tuple, shuffled: bool, pos_shift: int,
                  device) -> SimpleNamespace:
    """A set's rows, made in one fp32 block [q (B*H) | window (B*128) | named entries (B*k)] (sequence b
    the b-th of lens), and what of them no seed changes: each row's RoPE factor (an entry row's is
    looked up per set), `floor` (eps, or inf for a garbage row: its 1/RMS comes out 0) and `bias` (the
    garbage, 0 elsewhere); the keys' fixed part; window_len, cos and sin per sequence. Built on the host
    once and moved to the device."""
    n4 = ctx // RATIO
    k = min(topk, n4)
    L = torch.tensor(lens, dtype=torch.int64)
    pos, wl, nv = L - 1, L.clamp(max=WINDOW), L // RATIO
    c, s = rope_cos_sin(pos + pos_shift)
    slot = torch.arange(WINDOW)
    slot_pos = pos[:, None] - torch.remainder(pos[:, None] - slot[None, :], WINDOW)  # position in slot s
    cw, sw = rope_cos_sin(slot_pos.clamp(min=0) + pos_shift)
    ce, se = rope_cos_sin(torch.arange(n4) * RATIO + pos_shift)
    rq, rw = B * H, B * WINDOW
    turn = torch.zeros(rq + rw + B * k, ROPE // 2, dtype=torch.complex64)
    turn[:rq] = torch.complex(c, s)[:, None].expand(B, H, -1).reshape(rq, -1)
    turn[rq:rq + rw] = torch.complex(cw, sw).reshape(rw, -1)
    win_bad = (slot[None, :] >= wl[:, None]).reshape(-1)
    ent_bad = (torch.arange(k)[None, :] >= nv.clamp(max=k)[:, None]).reshape(-1)
    bad = torch.cat([torch.zeros(rq, dtype=torch.bool), win_bad, ent_bad])
    bias = torch.cat([torch.zeros(rq), win_bad * 50.0, ent_bad * -50.0])
    # The keys' fixed part: row b's entry number where visible, else _INVISIBLE; one more row, over the
    # sequences, whose k smallest keys give the set's order of sequences for free.
    j = torch.arange(max(n4, B))
    keys = torch.where(j[None, :] < torch.cat([nv, torch.tensor([B])])[:, None], j[None, :], _INVISIBLE)
    to = dict(device=device)
    return SimpleNamespace(
        B=B, H=H, k=k, rq=rq, rw=rw, top=max(k, B), turn=turn.to(**to), turn_entry=torch.complex(ce, se).to(**to),
        floor=torch.where(bad, float("inf"), EPS)[:, None].to(**to), bias=bias[:, None].to(**to),
        keys=keys.to(**to), order=None if shuffled else torch.arange(B, **to), n_vis=nv.to(**to),
        window_len=wl.to(torch.int32).to(**to), cos=c.to(**to), sin=s.to(**to),
        alternate=torch.tensor([1.0, -1.0]).repeat((H + 1) // 2)[:H].to(**to))


def _draw_order(t: SimpleNamespace, g: torch.Generator, seed: int):
    """A set's first draws: the window's and the compressed entries' RMSNorm gains (kv_norm's and the
    compressor's learned weights), then one int64 key per entry and sequence: a row's k smallest are its
    entries in a random order (-1 past its visible ones), the extra row's the sequences' order.
    make_inputs needs them before the cache; the refill replays them."""
    g.manual_seed(seed)
    gains = torch.empty(2, D, device=t.keys.device).uniform_(0.5, 1.5, generator=g)
    keys = torch.empty_like(t.keys).random_(0, 1 << _KEY_BITS, generator=g)
    torch.add(t.keys, keys, alpha=1 << 32, out=keys)
    vals, at = keys.topk(t.top, dim=1, largest=False)
    order = at[t.B, :t.B] if t.order is None else t.order   # sequence b of lens goes to order[b]
    entries = vals[:t.B, :t.k].view(torch.int32)[..., 0::2]
    return gains, order, entries


def _refill(xs, t: SimpleNamespace, seed: int, dtype, extreme_sinks: bool, write_rows) -> None:
    """Everything a call reads, written into xs: q (per-head RMSNorm, RoPE at pos), the window (RMSNorm
    with its gain, slot s roped at its position, garbage past window_len), the entries the new indices
    name (RMSNorm with the compressor's gain, entry j roped at 4j), the indices, sinks, window_len, cos,
    sin. In one block: one draw, one row norm, one RoPE multiply, one cast, then one scatter a tensor."""
    q_out, win_out, wl_out, comp, idx, sinks_out, c_out, s_out = xs
    dev = q_out.device
    g = _generator(dev)
    gains, order, entries = _draw_order(t, g, seed)
    x = torch.empty(t.turn.shape[0], D, device=dev).normal_(generator=g)
    rs = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    rs = torch.addcmul(t.floor, rs, rs, value=1 / D).rsqrt_()
    ent = t.rq + t.rw
    x[t.rq:ent].mul_(gains[0])
    x[ent:].mul_(gains[1])
    torch.ops.aten.index.Tensor_out(t.turn_entry, [entries], out=t.turn[ent:].view(t.B, t.k, ROPE // 2))
    torch.view_as_complex(x[:, D - ROPE:].unflatten(-1, (ROPE // 2, 2))).mul_(t.turn)
    # RoPE commutes with the row's scale; a garbage row comes out as its bias exactly (rs 0).
    y = torch.addcmul(t.bias, x, rs, out=torch.empty(x.shape, dtype=dtype, device=dev))
    q_out.index_copy_(0, order, y[:t.rq].view(t.B, t.H, D))
    win_out.index_copy_(0, order, y[t.rq:ent].view(t.B, WINDOW, D))
    write_rows(comp, order[:, None], entries, y[ent:].view(t.B, t.k, D))
    idx[:, :t.k].index_copy_(0, order, entries)
    for dst, src in ((wl_out, t.window_len), (c_out, t.cos), (s_out, t.sin)):
        dst.index_copy_(0, order, src)
    if extreme_sinks:  # ±28..38 on alternate heads
        sinks_out.uniform_(28.0, 38.0, generator=g).mul_(t.alternate)
    else:
        sinks_out.uniform_(-2.0, 8.0, generator=g)


def _cache_into(comp: torch.Tensor, g: torch.Generator, gain: torch.Tensor, n_vis: torch.Tensor,
                turn_entry: torch.Tensor) -> None:
    """make_inputs's whole compressed cache, in place in its dtype (an fp32 draw, norm and cast moved ~5x
    the bytes): N(0, 1) entries after RMSNorm with the gain, entry j roped at position 4j (turn_entry[j]),
    garbage (-50) from entry n_vis[b] on. The entries the indices name are then overwritten by
    _refill's rows (a timed batch's refill rewrites those alone)."""
    B, n4, d = comp.shape
    comp.normal_(generator=g)
    ms = torch.linalg.vector_norm(comp, dim=-1, keepdim=True, dtype=torch.float32).pow_(2).div_(d)
    comp.mul_(ms.add_(EPS).rsqrt_()).mul_(gain)
    z = comp[..., d - ROPE:].float()
    torch.view_as_complex(z.unflatten(-1, (ROPE // 2, 2))).mul_(turn_entry)
    comp[..., d - ROPE:] = z
    # Garbage where nothing valid lives: a kernel that reads it fails loudly.
    comp.masked_fill_(torch.arange(n4, device=comp.device)[None, :, None] >= n_vis[:, None, None], -50.0)


def write_entry_rows(comp: torch.Tensor, seq: torch.Tensor, entries: torch.Tensor, rows: torch.Tensor) -> None:
    """comp[seq[b], entries[b, s]] = rows[b, s]. An entry -1 (a slot past a sequence's visible entries)
    is its last entry, invisible then, and its row is garbage (-50) like every such row: the same bytes
    whichever of them lands."""
    comp.index_put_((seq, entries), rows)


def build_inputs(dims, dtype, seed, device, pos_shift: int = 0, topk_override: int | None = None,
                 all_visible_indices: bool = False, lens: torch.Tensor | None = None, extreme_sinks: bool = False,
                 out: tuple | list | None = None, rows_only: bool = False, write_rows=write_entry_rows):
    """make_inputs with knobs for tests: pos_shift rotates every vector (q, window, entries, cos/sin)
    as if all positions moved by pos_shift; all_visible_indices selects every visible entry; lens
    replaces the ragged lengths (in this order); extreme_sinks moves the sinks to ±28..38 (alternate
    heads). With out (an earlier result of the same dims, dtype and device) the values are written
    into it: the same values, since a new set is made by writing into new tensors. With rows_only, of
    the compressed cache only the entries the new indices name are written (write_rows(comp, seq,
    entries, rows) writes them; the FP8 task passes its own): what reference() and a kernel read of
    it, the rest is left as it was. The whole cache is drawn from a generator of its own, then the
    named entries overwritten: a make and a rows-only refill of the same seed agree wherever a call reads."""
    B, H, ctx = dims["batch"], dims["heads"], dims["ctx"]
    topk = topk_override or dims["topk"]
    n4 = ctx // RATIO
    dev = _device(out[0].device if out is not None else device)
    # Host ints (lens, when given, is a CPU tensor or a list): the tables' key, no device read.
    ls = tuple(spread_lengths(dims) if lens is None else (lens.tolist() if isinstance(lens, torch.Tensor) else lens))
    if all_visible_indices:
        assert all(L // RATIO <= topk for L in ls), "all_visible_indices needs topk >= visible entries"
    t = _kept(("csa", B, H, topk, ctx, ls, lens is None, pos_shift, str(dev)),
              lambda: _build_tables(B, H, topk, ctx, ls, lens is None, pos_shift, dev))
    if out is None:
        out = (torch.empty(B, H, D, dtype=dtype, device=dev), torch.empty(B, WINDOW, D, dtype=dtype, device=dev),
               torch.empty(B, dtype=torch.int32, device=dev), torch.empty(B, n4, D, dtype=dtype, device=dev),
               torch.full((B, topk), -1, dtype=torch.int32, device=dev), torch.empty(H, device=dev),
               torch.empty(B, ROPE // 2, device=dev), torch.empty(B, ROPE // 2, device=dev))
        rows_only = False
    if not rows_only:
        gains, seq_at, _ = _draw_order(t, _generator(dev), seed)
        n_vis = torch.empty_like(t.n_vis).index_copy_(0, seq_at, t.n_vis)
        _cache_into(out[3], _generator(dev, "cache").manual_seed(_sub_seed(seed, "cache")), gains[1], n_vis,
                    t.turn_entry)
    _refill(out, t, seed, dtype, extreme_sinks, write_rows)
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
# a call reads it: the entries the new indices name (harness.authoring.tasks.check_fill checks reference() on a
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
    return spread_lengths(dims)  # the multiset does not depend on the seed


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

"""DeepSeek V4 HCA decode: one new token per sequence attends to its sliding window plus EVERY
visible ratio-128 compressed entry (no indexer); shared-KV MQA, per-head attention sink in the
denominator, inverse RoPE on the output's last 64 dims.

Sources (DeepSeek's own inference code, public verbatim copies; cited by function):
- DS  = `inference/model.py` (github.com/Nicooo-Wang/DeepSeek-V4-Pro-code @ 0ec3a03,
  Mockingjay1316/deepseek-v4-flash-spark). `Attention.__init__`: compress_ratio 128 layers get a
  `Compressor(args, 128, 512)` and no Indexer. `Attention.forward` (decode): window indices from
  `get_window_topk_idxs`, compressed indices from `get_compress_topk_idxs(ratio, ..., start_pos,
  offset)` = `arange(0, (start_pos+1)//128) + 128`: the query sees entries j < (pos+1)//128, all of
  them; then `sparse_attn` and the inverse RoPE `apply_rotary_emb(o[..., -rd:], freqs_cis, True)`.
- DSK = `inference/kernel.py` `sparse_attn_kernel`: fp32 scores, P cast to bf16 before P.V, sink
  added once to the denominator (a logit with zero value, unscaled). Same kernel as CSA.
- RoPE: last 64 dims, interleaved pairs; compress_rope_theta 160000 + YaRN (factor 16,
  original_seq_len 65536, beta 32/1); entry j roped at position 128j (`Compressor.forward`:
  `freqs_cis[start_pos + 1 - ratio]`).

Task signature (B sequences at ragged positions pos[b]):
  q          bf16 [B, H, 512]    query (per-head RMSNorm, RoPE at pos[b])
  kv_window  bf16 [B, 128, 512]  ring buffer; slots >= window_len[b] hold garbage
  window_len i32  [B]            min(pos+1, 128)
  comp_cache bf16 [B, N128, 512] entries j < n_visible[b] valid, the rest garbage
  n_visible  i32  [B]            (pos+1)//128
  sinks      f32  [H];  cos, sin f32 [B, 32] at pos[b]
-> bf16 [B, H, 512]. fp32 reference; tolerance admits bf16 P (tested).
"""
import math
from collections import OrderedDict
from types import SimpleNamespace

import torch

D = 512
ROPE = 64
WINDOW = 128
RATIO = 128
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


def spread_lengths(dims: dict) -> list[int]:
    """Sequence lengths (pos+1) spread evenly over [min_ctx, ctx], the longest exactly ctx, ascending: the
    multiset make_inputs deals out in a random order per seed (bytes_moved() knows it exactly)."""
    B, ctx, lo = dims["batch"], dims["ctx"], min(dims.get("min_ctx", dims["ctx"]), dims["ctx"])
    return [lo + ((ctx - lo) * b) // max(B - 1, 1) for b in range(B)] if B > 1 else [ctx]


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
# make_inputs is the refill into new tensors: both agree by construction.

_TABLES: OrderedDict = OrderedDict()    # key -> the seed-independent tables of a shape, the last few used
_FREQS: dict[str, torch.Tensor] = {}
_GENERATORS: dict[str, torch.Generator] = {}
EPS = 1e-6


def _device(device) -> torch.device:
    d = torch.device(device)
    return torch.device("cuda", torch.cuda.current_device()) if d.type == "cuda" and d.index is None else d


def _freqs_on(device) -> torch.Tensor:
    key = str(_device(device))
    if key not in _FREQS:
        _FREQS[key] = rope_freqs().to(device)
    return _FREQS[key]


def _generator(device: torch.device) -> torch.Generator:
    """One generator per device, re-seeded for every set (making one is host work too)."""
    if str(device) not in _GENERATORS:
        _GENERATORS[str(device)] = torch.Generator(device=device)
    return _GENERATORS[str(device)]


def _kept(key: tuple, build):
    """_TABLES[key], built on first use; the eight shapes used last are kept."""
    got = _TABLES.pop(key, None)
    _TABLES[key] = got if got is not None else build()
    while len(_TABLES) > 8:
        _TABLES.popitem(last=False)
    return _TABLES[key]


def _build_tables(B: int, H: int, ctx: int, lens: tuple, shuffled: bool, pos_shift: int, device) -> SimpleNamespace:
    """A set's rows, made in one fp32 block [q (B*H) | window (B*128) | cache (B*N128)] (sequence b the
    b-th of lens), and what of them no seed changes: each row's RoPE factor, `floor` (eps, or inf for a
    garbage row: its 1/RMS comes out 0) and `bias` (the garbage, 0 elsewhere); window_len, n_visible,
    cos and sin per sequence. Built on the host once and moved to the device."""
    n = ctx // RATIO
    L = torch.tensor(lens, dtype=torch.int64)
    pos, wl, nv = L - 1, L.clamp(max=WINDOW), L // RATIO
    c, s = rope_cos_sin(pos + pos_shift)
    slot = torch.arange(WINDOW)
    slot_pos = pos[:, None] - torch.remainder(pos[:, None] - slot[None, :], WINDOW)  # position in slot s
    cw, sw = rope_cos_sin(slot_pos.clamp(min=0) + pos_shift)
    ce, se = rope_cos_sin(torch.arange(n) * RATIO + pos_shift)   # entry j at 128j
    turn = torch.cat([torch.complex(c, s)[:, None].expand(B, H, -1).reshape(B * H, -1),
                      torch.complex(cw, sw).reshape(B * WINDOW, -1),
                      torch.complex(ce, se)[None].expand(B, n, -1).reshape(B * n, -1)])
    win_bad = (slot[None, :] >= wl[:, None]).reshape(-1)
    cache_bad = (torch.arange(n)[None, :] >= nv[:, None]).reshape(-1)
    bad = torch.cat([torch.zeros(B * H, dtype=torch.bool), win_bad, cache_bad])
    bias = torch.cat([torch.zeros(B * H), win_bad * 50.0, cache_bad * -50.0])
    to = dict(device=device)
    return SimpleNamespace(
        B=B, H=H, n=n, rq=B * H, rw=B * WINDOW, shuffled=shuffled, turn=turn.to(**to),
        floor=torch.where(bad, float("inf"), EPS)[:, None].to(**to), bias=bias[:, None].to(**to),
        order=torch.arange(B, **to), window_len=wl.to(torch.int32).to(**to), n_vis=nv.to(torch.int32).to(**to),
        cos=c.to(**to), sin=s.to(**to), alternate=torch.tensor([1.0, -1.0]).repeat((H + 1) // 2)[:H].to(**to))


def _refill(xs, t: SimpleNamespace, seed: int, dtype, extreme_sinks: bool) -> None:
    """A whole set written into xs: q (per-head RMSNorm, RoPE at pos), the window (RMSNorm with kv_norm's
    gain, slot s roped at its position, garbage (50) past window_len), the cache (RMSNorm with the
    compressor's gain, entry j roped at 128j, garbage (-50) from n_visible on), window_len, n_visible,
    sinks, cos, sin. In one block: one draw, one row norm, one RoPE multiply, one cast, then one
    scatter a tensor."""
    q_out, win_out, wl_out, comp, nv_out, sinks_out, c_out, s_out = xs
    dev = q_out.device
    g = _generator(dev).manual_seed(seed)
    gains = torch.empty(2, D, device=dev).uniform_(0.5, 1.5, generator=g)
    order = torch.randperm(t.B, generator=g, device=dev) if t.shuffled else t.order  # sequence b goes to order[b]
    x = torch.empty(t.turn.shape[0], D, device=dev).normal_(generator=g)
    rs = torch.linalg.vector_norm(x, dim=-1, keepdim=True)
    rs = torch.addcmul(t.floor, rs, rs, value=1 / D).rsqrt_()
    cache = t.rq + t.rw
    x[t.rq:cache].mul_(gains[0])
    x[cache:].mul_(gains[1])
    torch.view_as_complex(x[:, D - ROPE:].unflatten(-1, (ROPE // 2, 2))).mul_(t.turn)
    # RoPE commutes with the row's scale; a garbage row comes out as its bias exactly (rs 0).
    y = torch.addcmul(t.bias, x, rs, out=torch.empty(x.shape, dtype=dtype, device=dev))
    for dst, src in ((q_out, y[:t.rq].view(t.B, t.H, D)), (win_out, y[t.rq:cache].view(t.B, WINDOW, D)),
                     (comp, y[cache:].view(t.B, t.n, D)), (wl_out, t.window_len), (nv_out, t.n_vis),
                     (c_out, t.cos), (s_out, t.sin)):
        dst.index_copy_(0, order, src)
    if extreme_sinks:  # ±28..38 on alternate heads
        sinks_out.uniform_(28.0, 38.0, generator=g).mul_(t.alternate)
    else:
        sinks_out.uniform_(-2.0, 8.0, generator=g)


def build_inputs(dims, dtype, seed, device, pos_shift: int = 0, lens: torch.Tensor | None = None,
                 extreme_sinks: bool = False, out: tuple | list | None = None):
    """make_inputs; pos_shift rotates every vector as if all positions moved by pos_shift; lens
    replaces the ragged lengths (in this order); extreme_sinks moves the sinks to ±28..38 (alternate
    heads). With out (an earlier result of the same dims, dtype and device) the values are written
    into it: the same values, since a new set is made by writing into new tensors."""
    B, H, ctx = dims["batch"], dims["heads"], dims["ctx"]
    n128 = ctx // RATIO
    dev = _device(out[0].device if out is not None else device)
    # Host ints (lens, when given, is a CPU tensor or a list): the tables' key, no device read.
    ls = tuple(spread_lengths(dims) if lens is None else (lens.tolist() if isinstance(lens, torch.Tensor) else lens))
    t = _kept(("hca", B, H, ctx, ls, lens is None, pos_shift, str(dev)),
              lambda: _build_tables(B, H, ctx, ls, lens is None, pos_shift, dev))
    if out is None:
        out = (torch.empty(B, H, D, dtype=dtype, device=dev), torch.empty(B, WINDOW, D, dtype=dtype, device=dev),
               torch.empty(B, dtype=torch.int32, device=dev), torch.empty(B, n128, D, dtype=dtype, device=dev),
               torch.empty(B, dtype=torch.int32, device=dev), torch.empty(H, device=dev),
               torch.empty(B, ROPE // 2, device=dev), torch.empty(B, ROPE // 2, device=dev))
    _refill(out, t, seed, dtype, extreme_sinks)
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


def fill_inputs(xs, dims, seed):
    """make_inputs(dims, dtype, seed, device)'s values written into xs, an earlier make_inputs result of
    the same dims, dtype and device (the harness refills a timed batch's inputs in place with it)."""
    build_inputs(dims, xs[0].dtype, seed, xs[0].device, out=xs, **_knobs(dims, seed))
    return True


def reference(q, kv_window, window_len, comp_cache, n_visible, sinks, cos, sin):
    B, H, d = q.shape
    W, N = kv_window.shape[1], comp_cache.shape[1]
    kv = torch.cat([kv_window, comp_cache], dim=1).float()                  # [B, W+N, d]
    valid = torch.cat([torch.arange(W, device=q.device)[None, :] < window_len[:, None],
                       torch.arange(N, device=q.device)[None, :] < n_visible[:, None]], dim=1)
    logits = torch.einsum("bhd,btd->bht", q.float(), kv) * SCALE
    logits = logits.masked_fill(~valid[:, None, :], float("-inf"))
    m = torch.maximum(logits.amax(-1), sinks[None, :])
    p = torch.exp(logits - m[..., None])
    denom = p.sum(-1) + torch.exp(sinks[None, :] - m)
    o = torch.einsum("bht,btd->bhd", p, kv) / denom[..., None]
    o = apply_rope(o, cos[:, None], sin[:, None], inverse=True)
    return o.to(q.dtype)


def _lens(dims):
    return spread_lengths(dims)


def input_bytes(dims, dtype):
    """What make_inputs allocates (the cache up to ctx; a sequence reads its visible part)."""
    es = torch.empty((), dtype=dtype).element_size()
    B, H = dims["batch"], dims["heads"]
    return (B * H * D + B * WINDOW * D + B * (dims["ctx"] // RATIO) * D) * es + 2 * B * 4 + H * 4 + 2 * B * 32 * 4


def bytes_moved(dims, dtype):
    es = torch.empty((), dtype=dtype).element_size()
    B, H = dims["batch"], dims["heads"]
    rows = sum(min(L, WINDOW) + L // RATIO for L in _lens(dims))
    return 2 * B * H * D * es + rows * D * es + 2 * B * 4 + H * 4 + 2 * B * 32 * 4


def flops(dims):
    rows = sum(min(L, WINDOW) + L // RATIO for L in _lens(dims))
    return 4 * dims["heads"] * D * rows

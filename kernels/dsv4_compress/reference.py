"""DeepSeek V4 compressor step at decode, when a sequence's window closes: per-channel softmax
pooling of the buffered slots, RMSNorm, RoPE at the entry's position. One task, three variants
(shapes): the CSA KV compressor (ratio 4, overlapping windows, d 512), the indexer's compressor
(ratio 4, overlapping, d 128) and the HCA compressor (ratio 128, no overlap, d 512).

Sources (DeepSeek's own inference code, public verbatim copies; cited by function):
- DS = `inference/model.py` (github.com/Nicooo-Wang/DeepSeek-V4-Pro-code @ 0ec3a03,
  Mockingjay1316/deepseek-v4-flash-spark). `Compressor.__init__`: overlap = (ratio == 4),
  coff = 1 + overlap; `ape` fp32 [ratio, coff*d]; state buffers kv_state/score_state fp32
  [B, coff*ratio, coff*d], score_state initialised to -inf. `Compressor.forward` decode branch:
  each step writes row (ratio + pos%ratio) [overlap] or (pos%ratio) with (kv, score + ape[pos%ratio]);
  when (pos+1) % ratio == 0 and overlap:
      kv_state = cat(state[:, :ratio, :d], state[:, ratio:, d:]); same for score_state
      kv = (kv_state * score_state.softmax(dim=1)).sum(dim=1)      # per channel, over 2*ratio slots
  (then state[:, :ratio] = state[:, ratio:]); without overlap the sum runs over the ratio rows.
  Then `kv = self.norm(kv.to(dtype))` (bf16 cast, RMSNorm eps 1e-6 with fp32 weight, bf16 out) and
  `apply_rotary_emb(kv[..., -rd:], freqs_cis[start_pos + 1 - ratio])`: RoPE at the entry's first
  token position (4j or 128j), fp32 math, written back into bf16. Afterwards DS simulates FP8 on
  the 448 NoPE dims (KV) or applies a Hadamard + FP4 simulation (indexer, rotate=True): both left
  out here (bf16 task; the Hadamard cancels in the indexer's q.k).
- RoPE: last 64 dims, interleaved pairs, compress_rope_theta 160000 + YaRN (config.json).

Task signature:
  kv_state    f32 [B, S, C]  S = 2*ratio, C = 2*d with overlap; S = ratio, C = d without
  score_state f32 [B, S, C]  gate logits with ape added; -inf where nothing was written yet
  norm_weight f32 [d]
  cos, sin    f32 [B, 32]    e^{i theta p} at the entry position p = ratio*j
  overlap     bool           ratio == 4
-> bf16 [B, d]
"""
import math

import torch

EPS = 1e-6
ROPE = 64

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


_FREQS: dict[str, torch.Tensor] = {}
_GENERATORS: dict[str, torch.Generator] = {}


def _device(device) -> torch.device:
    d = torch.device(device)
    return torch.device("cuda", torch.cuda.current_device()) if d.type == "cuda" and d.index is None else d


def _freqs_on(device, scale: int = 1) -> torch.Tensor:
    """scale * theta_i on a device, made there once (rope_freqs() is built on the host)."""
    key = f"{_device(device)}*{scale}"
    if key not in _FREQS:
        _FREQS[key] = (rope_freqs() * scale).to(device)
    return _FREQS[key]


def _generator(device: torch.device) -> torch.Generator:
    """One generator per device, re-seeded for every set (making one is host work too)."""
    if str(device) not in _GENERATORS:
        _GENERATORS[str(device)] = torch.Generator(device=device)
    return _GENERATORS[str(device)]


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate the last 64 dims of fp32 x [..., d] by e^{+-i theta pos}; cos/sin broadcast to [..., 32]."""
    x = x.clone()
    a, b = x[..., -ROPE::2], x[..., -ROPE + 1::2]
    s = -sin if inverse else sin
    x[..., -ROPE::2], x[..., -ROPE + 1::2] = a * cos - b * s, a * s + b * cos
    return x


def pool(kv_state, score_state, overlap: bool) -> torch.Tensor:
    """fp32 [B, d]: the per-channel softmax pooling of DS `Compressor.forward`."""
    if overlap:
        r, d = kv_state.shape[1] // 2, kv_state.shape[2] // 2
        kv_state = torch.cat([kv_state[:, :r, :d], kv_state[:, r:, d:]], dim=1)
        score_state = torch.cat([score_state[:, :r, :d], score_state[:, r:, d:]], dim=1)
    return (kv_state * score_state.softmax(dim=1)).sum(dim=1)


def finish(pooled, norm_weight, cos, sin) -> torch.Tensor:
    """bf16 cast, RMSNorm, RoPE (the post-pooling part of DS `Compressor.forward`)."""
    x = pooled.to(torch.bfloat16).float()
    x = (norm_weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))).to(torch.bfloat16)
    return apply_rope(x.float(), cos, sin).to(torch.bfloat16)


# Inputs that test the contract (issue 17), checked on every candidate (correctness only): the
# harness passes the case's name as dims["case"] (harness.authoring.tasks.hard_cases).
HARD_CASES = {
    "gate logits ~1e4": "score_state of magnitude ~1e4 (fp32): the per-channel softmax over the slots "
                        "overflows without its max shift",
    "first entry everywhere": "every sequence closes entry 0: the previous window's scores are all -inf",
    "kv ~1e-3": "kv_state ~1e-3: the pooled entry's mean square is about RMSNorm's eps (1e-6), which then counts",
}


def build_inputs(dims, dtype, seed, device, first_entry_rows: int = 1, score_scale: float = 2.0,
                 kv_scale: float = 1.0, out: tuple | list | None = None):
    """first_entry_rows sequences close their entry 0 (overlap: previous-window scores still -inf);
    score_scale and kv_scale scale the gate logits and the states. With out (an earlier result of the
    same dims, dtype and device) the values are written into it: the same values, since a new set is
    made by writing into new tensors (the states drawn in place, ~10 launches and no host sync: a
    timed batch refills a set a call)."""
    B, r, d = dims["batch"], dims["ratio"], dims["d"]
    overlap = r == 4
    S, C = (2 * r, 2 * d) if overlap else (r, d)
    dev = _device(out[0].device if out is not None else device)
    if out is None:
        out = (torch.empty(B, S, C, device=dev), torch.empty(B, S, C, device=dev), torch.empty(d, device=dev),
               torch.empty(B, ROPE // 2, device=dev), torch.empty(B, ROPE // 2, device=dev), overlap)
    kv, score, w_out, c_out, s_out, _ = out
    first = min(first_entry_rows, B)
    g = _generator(dev).manual_seed(seed)
    kv.normal_(0.0, kv_scale, generator=g)
    score.normal_(0.0, score_scale, generator=g)
    # Entries j, ragged (in fp64, the angles' type); a few sequences close entry 0 (nothing before it).
    j = torch.empty(B, 1, dtype=torch.float64, device=dev).random_(0, max(dims.get("max_entry", 1 << 18), 1), generator=g)
    j[:first].zero_()
    if overlap:
        score[:first, :r].fill_(float("-inf"))
        kv[:first, :r].zero_()
    w_out.uniform_(0.5, 1.5, generator=g)
    ang = j * _freqs_on(dev, r)  # entry j's position is ratio*j (exactly: r is a power of two)
    torch.cos(ang, out=c_out)
    torch.sin(ang, out=s_out)
    return tuple(out) if isinstance(out, tuple) else out


def _knobs(dims):
    """build_inputs's knobs for a hard case (dims["case"]), {} for the plain inputs."""
    case = dims.get("case")
    if case == "first entry everywhere":
        return {"first_entry_rows": dims["batch"]}
    if case == "gate logits ~1e4":
        return {"score_scale": 2.0 * 5000.0}
    if case == "kv ~1e-3":
        return {"kv_scale": 1e-3}
    if case is not None:
        raise ValueError(f"unknown hard case {case!r}")
    return {}


def make_inputs(dims, dtype, seed, device):
    return build_inputs(dims, dtype, seed, device, **_knobs(dims))


def fill_inputs(xs, dims, seed):
    """make_inputs(dims, dtype, seed, device)'s values written into xs, an earlier make_inputs result of
    the same dims, dtype and device (the harness refills a timed batch's inputs in place with it)."""
    build_inputs(dims, None, seed, xs[0].device, out=xs, **_knobs(dims))
    return True


def reference(kv_state, score_state, norm_weight, cos, sin, overlap):
    return finish(pool(kv_state.float(), score_state.float(), overlap), norm_weight.float(), cos, sin)


def bytes_moved(dims, dtype):
    B, r, d = dims["batch"], dims["ratio"], dims["d"]
    S, C = (2 * r, 2 * d) if r == 4 else (r, d)
    # With overlap only half of each state row is pooled: S*C/2 of each state tensor is read.
    elems = S * C // 2 if r == 4 else S * C
    return B * (2 * elems * 4 + 2 * 32 * 4 + d * 2) + d * 4


def flops(dims):
    B, r, d = dims["batch"], dims["ratio"], dims["d"]
    S = 2 * r if r == 4 else r
    return B * d * (4 * S + 8)

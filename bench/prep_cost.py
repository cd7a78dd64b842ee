"""Issue 18: what a timed batch's `prep` costs the child, before and after the in-place refill.

Each timed batch starts with the child writing n fresh input sets (from the parent's seeds) into the
buffers its captured CUDA graph reads (harness/evaluate/child.py Child._refill). This times that call,
the harness's own code, on two input makers:
  before  the makers before the change, verbatim (softmax: an fp32 draw, a scale and a cast; csa decode:
          a host randperm per sequence, each waiting on the device for its count, both from 6107866;
          hca decode, indexer top-k, compress: an fp32 draw, norm and rope of the whole cache, then a
          cast; csa fp8: today's bf16 make and the quantiser with its concatenated copy, all from
          2eecb5f): every set made and copied, as _refill does without a fill_inputs;
  after   the task's reference.py now: fill_inputs writes make_inputs's values in place, the whole
          set (`fill` whole), or for the csa decodes only what a call reads (`fill` read: the window
          and the cache entries the new indices name; reference.py FILL_READS_ONLY);
  whole   (read-only tasks) the same inputs refilled whole in place, every cache entry redrawn (the
          csa decode's fill before the read-only one): what reading-only saves.
n is the harness's own batch size for the shape at a call time of 1 µs (so the byte cap decides:
parent_clock.calls_per_batch, inputs + outputs); ms per batch is the median over --reps batches, each
ended by a device sync. `same` checks two sets of the refilled batch against make_inputs of their
seeds (what the parent rebuilds to check a call): bit-identical, or for a read-only fill every other
argument bit-identical and reference()'s output over the set bit-identical (harness.authoring.tasks
filled_as_made). `fresh`: no two sets of a batch hold the same values.

  python bench/prep_cost.py            # on the GPU: softmax 4k x 4k, the dsv4 tasks at flash 64k x64 (< 2 min)
  python bench/prep_cost.py --cpu      # small shapes on the CPU: the plumbing only
  python bench/prep_cost.py --tasks dsv4_hca_decode,dsv4_compress   # some of them
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from harness.evaluate import parent_clock  # noqa: E402
from harness.evaluate.child import Child  # noqa: E402
from harness.authoring.tasks import filled_as_made, load_task  # noqa: E402

# The makers before this change, verbatim (softmax: its default case; csa: build_inputs), run in the
# namespace of today's reference.py with the helpers they called then (OLD_HELPERS, from 09e4add: the
# lengths' order a host randperm, RoPE frequencies built on the host and moved each call).
OLD_HELPERS = '''
def rope_cos_sin(pos):
    ang = pos.to(torch.float64).unsqueeze(-1) * rope_freqs().to(pos.device)
    return torch.cos(ang).float(), torch.sin(ang).float()


def ragged_lengths(dims, seed):
    B, ctx, lo = dims["batch"], dims["ctx"], min(dims.get("min_ctx", dims["ctx"]), dims["ctx"])
    lens = [lo + ((ctx - lo) * b) // max(B - 1, 1) for b in range(B)] if B > 1 else [ctx]
    perm = torch.randperm(B, generator=torch.Generator().manual_seed(seed + 7))
    return torch.tensor(lens, dtype=torch.int64)[perm]


def _rmsnormed(g, shape, device):
    x = torch.randn(*shape, generator=g, device=device)
    gain = 0.5 + torch.rand(shape[-1], generator=g, device=device)  # kv_norm's learned weight
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * gain
'''
OLD_SOFTMAX = '''
def make_inputs(dims, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    rows, cols = dims["rows"], dims["cols"]
    x = torch.randn(rows, cols, generator=g, dtype=torch.float32, device=device) * 4.0
    return (x.to(dtype=dtype),)
'''
OLD_CSA = '''
def make_inputs(dims, dtype, seed, device, pos_shift=0, topk_override=None, all_visible_indices=False,
                lens=None, extreme_sinks=False):
    B, H, ctx = dims["batch"], dims["heads"], dims["ctx"]
    topk = topk_override or dims["topk"]
    n4 = ctx // RATIO
    lens = (ragged_lengths(dims, seed) if lens is None else lens).to(device)
    pos = lens - 1
    g = torch.Generator(device=device).manual_seed(seed)
    q = _rmsnormed(g, (B, H, D), device)
    q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + 1e-6)  # DS: unweighted per-head RMSNorm
    kv_win = _rmsnormed(g, (B, WINDOW, D), device)
    comp = _rmsnormed(g, (B, n4, D), device)
    slot = torch.arange(WINDOW, device=device)
    slot_pos = pos[:, None] - torch.remainder(pos[:, None] - slot[None, :], WINDOW)  # position in slot s
    window_len = torch.clamp(lens, max=WINDOW)
    n_vis = lens // RATIO
    c, s = rope_cos_sin(pos + pos_shift)
    q = apply_rope(q, c[:, None], s[:, None])
    cw, sw = rope_cos_sin(slot_pos.clamp(min=0) + pos_shift)
    kv_win = apply_rope(kv_win, cw, sw)
    ce, se = rope_cos_sin(torch.arange(n4, device=device) * RATIO + pos_shift)
    comp = apply_rope(comp, ce[None], se[None])
    kv_win = torch.where((slot[None, :] < window_len[:, None])[..., None], kv_win, 50.0)
    comp = torch.where((torch.arange(n4, device=device)[None, :] < n_vis[:, None])[..., None], comp, -50.0)
    idx = torch.full((B, topk), -1, dtype=torch.int32, device=device)
    gi = torch.Generator().manual_seed(seed + 1)
    for b in range(B):
        nv = int(n_vis[b])
        k = min(topk, nv)
        sel = torch.randperm(nv, generator=gi)[:k]
        idx[b, :k] = sel.to(device=device, dtype=torch.int32)
    sinks = (torch.rand(H, generator=g, device=device) * 10 - 2).float()
    return (q.to(dtype), kv_win.to(dtype), window_len.to(torch.int32), comp.to(dtype), idx, sinks, c, s)
'''

# 2eecb5f's makers (the default case of each; the helpers they call are unchanged).
OLD_HCA = '''
def make_inputs(dims, dtype, seed, device, pos_shift=0, lens=None, extreme_sinks=False):
    B, H, ctx = dims["batch"], dims["heads"], dims["ctx"]
    n128 = ctx // RATIO
    lens = (ragged_lengths(dims, seed) if lens is None else lens).to(device)
    pos = lens - 1
    g = torch.Generator(device=device).manual_seed(seed)
    q = _rmsnormed(g, (B, H, D), device)
    q = q * torch.rsqrt(q.pow(2).mean(-1, keepdim=True) + 1e-6)  # DS: unweighted per-head RMSNorm
    kv_win = _rmsnormed(g, (B, WINDOW, D), device)
    comp = _rmsnormed(g, (B, n128, D), device)
    slot = torch.arange(WINDOW, device=device)
    slot_pos = pos[:, None] - torch.remainder(pos[:, None] - slot[None, :], WINDOW)
    window_len = torch.clamp(lens, max=WINDOW)
    n_vis = lens // RATIO
    c, s = rope_cos_sin(pos + pos_shift)
    q = apply_rope(q, c[:, None], s[:, None])
    cw, sw = rope_cos_sin(slot_pos.clamp(min=0) + pos_shift)
    kv_win = apply_rope(kv_win, cw, sw)
    ce, se = rope_cos_sin(torch.arange(n128, device=device) * RATIO + pos_shift)
    comp = apply_rope(comp, ce[None], se[None])
    kv_win = torch.where((slot[None, :] < window_len[:, None])[..., None], kv_win, 50.0)
    comp = torch.where((torch.arange(n128, device=device)[None, :] < n_vis[:, None])[..., None], comp, -50.0)
    sinks = (torch.rand(H, generator=g, device=device) * 10 - 2).float()
    if extreme_sinks:
        sinks = torch.where(torch.arange(H, device=device) % 2 == 0, 30.0 + sinks, -30.0 - sinks)
    return (q.to(dtype), kv_win.to(dtype), window_len.to(torch.int32), comp.to(dtype),
            n_vis.to(torch.int32), sinks, c, s)
'''
OLD_INDEXER = '''
def make_inputs(dims, dtype, seed, device, pos_shift=0, lens=None, tied=False):
    B, ctx, topk = dims["batch"], dims["ctx"], dims["topk"]
    H = dims.get("heads", IDX_HEADS)
    n4 = ctx // RATIO
    lens = (ragged_lengths(dims, seed) if lens is None else lens).to(device)
    pos = lens - 1
    g = torch.Generator(device=device).manual_seed(seed)
    q = torch.randn(B, H, IDX_DIM, generator=g, device=device)
    k = torch.randn(B, n4, IDX_DIM, generator=g, device=device)
    k = k * torch.rsqrt(k.pow(2).mean(-1, keepdim=True) + 1e-6)  # the compressor's RMSNorm
    c, s = rope_cos_sin(pos + pos_shift)
    q = apply_rope(q, c[:, None], s[:, None])
    ce, se = rope_cos_sin(torch.arange(n4, device=device) * RATIO + pos_shift)
    k = apply_rope(k, ce[None], se[None])
    if tied:
        k = k[:, :1].expand_as(k).contiguous()
    n_vis = lens // RATIO
    # Invisible rows: large and aligned with q, so that scoring them would win the top-k.
    garbage = 8.0 * torch.sign(q.sum(1, keepdim=True))
    k = torch.where((torch.arange(n4, device=device)[None, :] < n_vis[:, None])[..., None], k, garbage)
    w = torch.randn(B, H, generator=g, device=device) * (IDX_DIM ** -0.5 * H ** -0.5)
    return q.to(dtype), w.float(), k.to(dtype), n_vis.to(torch.int32), topk
'''
OLD_COMPRESS = '''
def make_inputs(dims, dtype, seed, device, first_entry_rows=1):
    B, r, d = dims["batch"], dims["ratio"], dims["d"]
    overlap = r == 4
    S, C = (2 * r, 2 * d) if overlap else (r, d)
    g = torch.Generator(device=device).manual_seed(seed)
    kv = torch.randn(B, S, C, generator=g, device=device)
    score = torch.randn(B, S, C, generator=g, device=device) * 2.0
    # Entries j, ragged; a few sequences close entry 0 (nothing before it).
    j = torch.randint(0, max(dims.get("max_entry", 1 << 18), 1), (B,), generator=g, device=device)
    j[:min(first_entry_rows, B)] = 0
    if overlap:
        score[:min(first_entry_rows, B), :r] = float("-inf")
        kv[:min(first_entry_rows, B), :r] = 0.0
    w = 0.5 + torch.rand(d, generator=g, device=device)
    c, s = rope_cos_sin(j * r)
    return kv, score, w, c, s, overlap
'''
OLD_FP8 = '''
def quantize(cache, block_size=BLOCK_SIZE):
    B, N, d = cache.shape
    nblk = -(-N // block_size)
    # Each sequence's last block is padded with zero tokens.
    x = torch.cat([cache, cache.new_zeros(B, nblk * block_size - N, d)], 1).reshape(B * nblk, block_size, d)
    out = torch.zeros(B * nblk, block_bytes(block_size), dtype=torch.uint8, device=cache.device)
    rows = out[:, :block_size * ROW_BYTES].view(B * nblk, block_size, ROW_BYTES)
    rows[:, :, D_NOPE:] = x[..., D_NOPE:].contiguous().view(torch.uint8).view(B * nblk, block_size, 2 * D_ROPE)
    scales = out[:, block_size * ROW_BYTES:block_size * BYTES_PER_TOKEN].view(B * nblk, block_size, 8)
    for t in range(N_TILES):
        tile = x[..., t * TILE:(t + 1) * TILE]
        s = tile.abs().amax(dim=-1).float() / 448.0
        s = torch.pow(2, torch.clamp_min(s, 1e-4).log2().ceil())   # ue8m0, as _cast_scale_inv_to_ue8m0
        scales[:, :, t] = s.to(torch.float8_e8m0fnu).view(torch.uint8)
        q = (tile.float() / s[..., None]).to(torch.float8_e4m3fn)
        rows[:, :, t * TILE:(t + 1) * TILE] = q.view(torch.uint8)
    return out.view(B, nblk, -1)


def make_inputs(dims, dtype, seed, device):
    q, kvw, wl, comp, idx, sinks, cos, sin = BF16_TASK.make_inputs(dims, dtype, seed, device)
    return q, kvw, wl, quantize(comp), idx, sinks, cos, sin
'''

GPU_CASES = [("softmax", "4k x 4k", OLD_SOFTMAX), ("dsv4_csa_decode", "flash 64k x64", OLD_CSA),
             ("dsv4_csa_decode_fp8", "flash 64k x64", OLD_FP8), ("dsv4_hca_decode", "flash 64k x64", OLD_HCA),
             ("dsv4_indexer_topk", "flash 64k x64", OLD_INDEXER), ("dsv4_compress", "csa kv d512 x128", OLD_COMPRESS)]
CPU_CASES = [("softmax", {"rows": 256, "cols": 4096}, OLD_SOFTMAX),
             ("dsv4_csa_decode", {"batch": 3, "heads": 16, "topk": 32, "ctx": 4096, "min_ctx": 1024}, OLD_CSA),
             ("dsv4_csa_decode_fp8", {"batch": 2, "heads": 16, "topk": 64, "ctx": 4096, "min_ctx": 1000}, OLD_FP8),
             ("dsv4_hca_decode", {"batch": 3, "heads": 16, "ctx": 8192, "min_ctx": 2048}, OLD_HCA),
             ("dsv4_indexer_topk", {"batch": 3, "topk": 64, "ctx": 4096, "min_ctx": 1000}, OLD_INDEXER),
             ("dsv4_compress", {"batch": 16, "ratio": 4, "d": 512}, OLD_COMPRESS)]


def old_maker(ref: types.ModuleType, src: str) -> types.SimpleNamespace:
    ns = dict(vars(ref))
    if "apply_rope" in ns:  # the dsv4 tasks: their helpers as they were
        exec(OLD_HELPERS, ns)  # noqa: S102 - the harness's own pre-change code, above
    exec(src, ns)  # noqa: S102 - the harness's own pre-change code, above
    return types.SimpleNamespace(make_inputs=ns["make_inputs"])  # no fill_inputs: made and copied


def whole_filler(ref: types.ModuleType) -> types.SimpleNamespace | None:
    """For a task that refills only what a call reads (FILL_READS_ONLY): the same inputs refilled whole,
    in place (the csa decodes' fill before that change: every cache entry redrawn, the FP8 cache built
    in bf16 and quantised), to show what reading-only saves. None for the others."""
    if not getattr(ref, "FILL_READS_ONLY", ()):
        return None
    bf16 = getattr(ref, "BF16_TASK", None)

    def fill(xs: list, dims: dict, seed: int) -> bool:
        q = xs[0]
        if bf16 is None:
            ref.build_inputs(dims, q.dtype, seed, q.device, out=xs, **ref._knobs(dims, seed))
            return True
        comp = torch.empty(dims["batch"], dims["ctx"] // 4, ref.D, dtype=q.dtype, device=q.device)
        bf16.build_inputs(dims, q.dtype, seed, q.device, out=[*xs[:3], comp, *xs[4:]], **bf16._knobs(dims, seed))
        ref.quantize(comp, out=xs[3])
        return True

    return types.SimpleNamespace(make_inputs=ref.make_inputs, fill_inputs=fill)


def child_with(ref: object, dtype: torch.dtype, device: str) -> Child:
    """The child's own _refill, on an object holding just what it reads."""
    c = Child.__new__(Child)
    c.torch, c.ref, c.make_inputs, c.dtype, c.device = torch, ref, ref.make_inputs, dtype, device
    return c


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def per_batch_ms(c: Child, bufs: list, dims: dict, n: int, reps: int, device: str, base: int) -> list[float]:
    out = []
    for r in range(reps + 1):  # the first: allocator and kernels warm
        seeds = [base + r * n + i for i in range(n)]
        sync(device)
        t0 = time.perf_counter()
        assert c._refill(bufs, dims, seeds), "the refill fell back to a new capture"
        sync(device)
        if r:
            out.append((time.perf_counter() - t0) * 1e3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", action="store_true", help="small shapes on the CPU (the plumbing only)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tasks", default="", help="comma-separated task names (default: all of the table)")
    a = ap.parse_args()
    device = "cpu" if a.cpu or not torch.cuda.is_available() else "cuda"
    rows = []
    cases = CPU_CASES if device == "cpu" else GPU_CASES
    wanted = [t for t in a.tasks.split(",") if t]
    unknown = [t for t in wanted if t not in {c[0] for c in cases}]
    if unknown:
        print(f"prep_cost: no case for {', '.join(unknown)} (known: {', '.join(c[0] for c in cases)})", file=sys.stderr)
        return 2
    for name, shape, old_src in cases:
        if wanted and name not in wanted:
            continue
        task = load_task(name)
        ref = task.load_reference()
        dims = shape if isinstance(shape, dict) else next(s.dims for s in task.shapes if s.name == shape)
        label = shape if isinstance(shape, str) else "cpu " + "x".join(str(v) for v in shape.values())
        dt = getattr(torch, task.dtypes[0])
        one = ref.make_inputs(dims, dt, 0, device)
        in_b = sum(x.numel() * x.element_size() for x in one if isinstance(x, torch.Tensor))
        out = ref.reference(*one)
        out_b = out.numel() * out.element_size()
        del one, out
        free = torch.cuda.mem_get_info()[0] // 4 if device == "cuda" else 2 ** 30
        n = parent_clock.calls_per_batch(1.0, in_b + out_b, free)
        if device == "cpu":
            n = min(n, 8)
        figs, same = {}, True
        whole = whole_filler(ref)
        makers = [("before", old_maker(ref, old_src)), ("whole", whole), ("after", ref)]
        for k, (path, maker) in enumerate(makers):
            if maker is None:
                continue
            c = child_with(maker, dt, device)
            bufs = [c.inputs(dims, 10_000_000 + i) for i in range(n)]
            figs[path] = per_batch_ms(c, bufs, dims, n, a.reps, device, 1000 * (k + 1))
            last = [1000 * (k + 1) + a.reps * n + i for i in range(n)]  # the last batch's seeds
            if path == "whole":  # every argument bit for bit
                same &= all(all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
                                for x, y in zip(bufs[j], c.inputs(dims, last[j]))) for j in (0, n - 1))
            if path == "after":
                same &= all(filled_as_made(ref, bufs[j], c.inputs(dims, last[j])) for j in (0, n - 1))
                fresh = n < 2 or not any(torch.equal(x, y) for x, y in zip(bufs[0], bufs[1])
                                         if isinstance(x, torch.Tensor) and x.numel() > 64)
            del bufs, c
            if device == "cuda":
                torch.cuda.empty_cache()
        b, f = statistics.median(figs["before"]), statistics.median(figs["after"])
        w = statistics.median(figs["whole"]) if "whole" in figs else None
        rows.append((name, label, n, in_b / 2 ** 20, b, w, f, same, fresh, "read" if whole else "whole"))
    dev = torch.cuda.get_device_name() if device == "cuda" else "cpu"
    print(f"\nprep per timed batch (child's _refill + device sync), {dev}, median of {a.reps}")
    print(f"{'task':20} {'shape':22} {'n':>4} {'MiB/set':>8} {'before ms':>10} {'whole ms':>9} {'after ms':>9} {'x':>6}"
          f"  fill   same  fresh")
    for name, label, n, mib, b, w, f, same, fresh, fill in rows:
        whole_ms = f"{w:9.2f}" if w is not None else f"{'-':>9}"
        print(f"{name:20} {label:22} {n:4d} {mib:8.1f} {b:10.2f} {whole_ms} {f:9.2f} {b / max(f, 1e-9):6.2f}  {fill:5}  "
              f"{'yes' if same else 'NO':4}  {'yes' if fresh else 'NO'}")
    return 0 if all(r[7] and r[8] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

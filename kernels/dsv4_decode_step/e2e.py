"""One DeepSeek V4 decode step's attention work for a CSA layer and an HCA layer, built from the
dsv4_* tasks' current kernels (each task folder's kernel.py: the baseline, or what the loop kept),
so that a kernel win can be checked against the step it lives in.

Per step, for every sequence b at position pos[b] (ragged), as DS `Attention.forward` /
`Compressor.forward` / `Indexer.forward` do in decode (inference/model.py; copies:
Nicooo-Wang/DeepSeek-V4-Pro-code@0ec3a03, Mockingjay1316/deepseek-v4-flash-spark@1795ef7):
  CSA layer: window ring-buffer write (slot pos%128) -> KV compressor and indexer compressor state
    writes, and when (pos+1)%4 == 0 the compressor step (dsv4_compress) into comp_cache / idx_cache
    at entry pos//4 -> indexer top-k (dsv4_indexer_topk) -> sparse decode (dsv4_csa_decode).
  HCA layer: window write -> ratio-128 compressor state write, compressor step when (pos+1)%128 == 0
    -> dense decode over all visible entries (dsv4_hca_decode).
  pos += 1.
The projections (wq_a/wq_b/wkv/wgate/weights_proj/wo) are GEMMs outside these tasks: their
outputs are fixed random per-step inputs here. Everything runs on device tensors with no host
sync, so the whole step is captured in one CUDA graph and replayed.

For harness/model/e2e.py: TASKS, TOLERANCE and build(kernels, device) -> workload whose run() is one
step (it returns (csa_out, hca_out)); tasks missing from `kernels` use their folder's kernel.py.
On CUDA the workload is V4-Flash at 64k context, batch 16 (ragged 32k..64k); on CPU it is a tiny
config (16 heads, top-k 32, 768 tokens) that the Triton interpreter runs in seconds.

Run (GPU):  PYTHONPATH=. python kernels/dsv4_decode_step/e2e.py --model flash --ctx 65536 --batch 16 \
                [--kernel dsv4_csa_decode=KEPT.py ...]   # the per-task winners stacked
It checks the kernels' step against the references' step (eager, and each reference under
torch.compile), then times CUDA-graph replays of all three and prints the kernels' speedup over both.
Only torch and triton are imported (the device has no harness dependencies).
"""
from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

KERNELS = Path(__file__).resolve().parent.parent
WINDOW, D, ROPE, IDX_HEADS, IDX_DIM = 128, 512, 64, 64, 128
MODELS = {"flash": dict(heads=64, topk=512), "pro": dict(heads=128, topk=1024),
          "tiny": dict(heads=16, topk=32)}  # tiny: for the CPU tests in the Triton interpreter


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@dataclass
class Impl:
    """The four operations, from the tasks' kernel.py ("kernel") or reference.py ("reference")."""
    indexer_topk: object
    csa_decode: object
    hca_decode: object
    compress: object


TASKS = ("dsv4_indexer_topk", "dsv4_csa_decode", "dsv4_hca_decode", "dsv4_compress")
_FIELD = dict(zip(TASKS, ("indexer_topk", "csa_decode", "hca_decode", "compress")))
# Outputs of a whole step: a different (near-tie) top-k choice moves the CSA output a little.
TOLERANCE = (2e-2, 4e-2)


def load_impl(which: str, overrides: dict | None = None) -> Impl:
    """which: "kernel" (each task's kernel.py) or "reference"; overrides: {task name: fn}."""
    fns = {}
    for task in TASKS:
        if overrides and task in overrides:
            fns[_FIELD[task]] = overrides[task]
            continue
        fname = "kernel.py" if which == "kernel" else "reference.py"
        mod = _load(KERNELS / task / fname, f"e2e_{which}_{task}")
        fns[_FIELD[task]] = getattr(mod, task if which == "kernel" else "reference")
    return Impl(**fns)


def compressor_update(kv_state, score_state, kv_row, score_row, pos, ratio: int, overlap: bool):
    """DS `Compressor.forward` decode state write, in place: row ratio + pos%ratio (overlap) or
    pos%ratio gets (kv, score + ape) — the caller passes score_row with ape already added."""
    rows = torch.arange(kv_state.shape[0], device=kv_state.device)
    slot = (pos % ratio) + (ratio if overlap else 0)
    kv_state[rows, slot] = kv_row
    score_state[rows, slot] = score_row


def compressor_shift(kv_state, score_state, due, ratio: int):
    """After an overlap compression DS moves the own window to the previous-window half."""
    m = due[:, None, None]
    kv_state[:, :ratio] = torch.where(m, kv_state[:, ratio:], kv_state[:, :ratio])
    score_state[:, :ratio] = torch.where(m, score_state[:, ratio:], score_state[:, :ratio])


def write_entry(cache, entry, pos, ratio: int, due):
    """cache[b, pos//ratio] = entry[b] where this step closes b's window; untouched elsewhere."""
    rows = torch.arange(cache.shape[0], device=cache.device)
    j = torch.div(pos, ratio, rounding_mode="floor").clamp(max=cache.shape[1] - 1)
    cache[rows, j] = torch.where(due[:, None], entry.to(cache.dtype), cache[rows, j])


class DecodeStep:
    """The state of one CSA and one HCA layer for a batch, and the step that advances it."""

    def __init__(self, model: str, ctx: int, batch: int, device, impl: Impl, seed: int = 0,
                 min_ctx: int | None = None):
        cfg = MODELS[model]
        self.H, self.topk, self.impl, self.ctx = cfg["heads"], cfg["topk"], impl, ctx
        dev = torch.device(device)
        g = torch.Generator(device=dev).manual_seed(seed)
        B = batch

        def rn(*shape, scale=1.0):
            return torch.randn(*shape, generator=g, device=dev) * scale

        lo = min_ctx if min_ctx is not None else ctx // 2
        # Room for the steps a session runs: positions start below ctx - 64.
        lens = torch.linspace(lo, ctx - 64, B, device=dev).long()
        self.pos = (lens - 1).clone()
        self.start_pos = self.pos.clone()
        ref = _load(KERNELS / "dsv4_csa_decode" / "reference.py", "e2e_rope")
        all_pos = torch.arange(ctx, device=dev)
        self.cos_tab, self.sin_tab = ref.rope_cos_sin(all_pos)  # [ctx, 32]; gathered per step
        bf = torch.bfloat16
        n4, n128 = ctx // 4, ctx // 128
        # Caches (content random; what matters is that both impls see the same state).
        self.csa_window = rn(B, WINDOW, D).to(bf)
        self.csa_comp = rn(B, n4, D).to(bf)
        self.idx_cache = rn(B, n4, IDX_DIM).to(bf)
        self.hca_window = rn(B, WINDOW, D).to(bf)
        self.hca_comp = rn(B, n128, D).to(bf)
        self.csa_kv_state, self.csa_score_state = rn(B, 8, 2 * D), rn(B, 8, 2 * D, scale=2.0)
        self.idx_kv_state, self.idx_score_state = rn(B, 8, 2 * IDX_DIM), rn(B, 8, 2 * IDX_DIM, scale=2.0)
        self.hca_kv_state, self.hca_score_state = rn(B, 128, D), rn(B, 128, D, scale=2.0)
        self.csa_norm_w, self.idx_norm_w, self.hca_norm_w = (0.5 + torch.rand(n, generator=g, device=dev)
                                                             for n in (D, IDX_DIM, D))
        self.csa_sinks, self.hca_sinks = (torch.rand(self.H, generator=g, device=dev) * 10 - 2 for _ in range(2))
        # Per-step projection outputs (fixed buffers: a CUDA graph replays on them).
        qn = rn(B, self.H, D)
        self.q = (qn * torch.rsqrt(qn.pow(2).mean(-1, keepdim=True) + 1e-6)).to(bf)
        self.kv_new = rn(B, D).to(bf)
        self.csa_kv_row, self.csa_score_row = rn(B, 2 * D), rn(B, 2 * D, scale=2.0)
        self.idx_q, self.idx_w = rn(B, IDX_HEADS, IDX_DIM).to(bf), rn(B, IDX_HEADS, scale=IDX_DIM ** -0.5 * IDX_HEADS ** -0.5)
        self.idx_kv_row, self.idx_score_row = rn(B, 2 * IDX_DIM), rn(B, 2 * IDX_DIM, scale=2.0)
        self.hca_kv_row, self.hca_score_row = rn(B, D), rn(B, D, scale=2.0)
        self.csa_out = self.hca_out = None

    def run(self):
        return self.step()

    def step(self):
        im, pos, B = self.impl, self.pos, self.pos.shape[0]
        rows = torch.arange(B, device=pos.device)
        cos_q, sin_q = self.cos_tab[pos], self.sin_tab[pos]
        window_len = torch.clamp(pos + 1, max=WINDOW).to(torch.int32)
        # ---- CSA layer ----
        self.csa_window[rows, pos % WINDOW] = self.kv_new
        due4 = (pos + 1) % 4 == 0
        e4 = (pos + 1 - 4).clamp(min=0)
        cos4, sin4 = self.cos_tab[e4], self.sin_tab[e4]
        for kv_s, sc_s, kv_r, sc_r, w, cache in (
                (self.csa_kv_state, self.csa_score_state, self.csa_kv_row, self.csa_score_row, self.csa_norm_w, self.csa_comp),
                (self.idx_kv_state, self.idx_score_state, self.idx_kv_row, self.idx_score_row, self.idx_norm_w, self.idx_cache)):
            compressor_update(kv_s, sc_s, kv_r, sc_r, pos, 4, True)
            entry = im.compress(kv_s, sc_s, w, cos4, sin4, True)
            write_entry(cache, entry, pos, 4, due4)
            compressor_shift(kv_s, sc_s, due4, 4)
        n_vis4 = torch.div(pos + 1, 4, rounding_mode="floor").to(torch.int32)
        indices = im.indexer_topk(self.idx_q, self.idx_w, self.idx_cache, n_vis4, self.topk)
        self.indices = indices
        self.csa_out = im.csa_decode(self.q, self.csa_window, window_len, self.csa_comp, indices,
                                     self.csa_sinks, cos_q, sin_q)
        # ---- HCA layer ----
        self.hca_window[rows, pos % WINDOW] = self.kv_new
        due128 = (pos + 1) % 128 == 0
        e128 = (pos + 1 - 128).clamp(min=0)
        compressor_update(self.hca_kv_state, self.hca_score_state, self.hca_kv_row, self.hca_score_row, pos, 128, False)
        entry = im.compress(self.hca_kv_state, self.hca_score_state, self.hca_norm_w,
                            self.cos_tab[e128], self.sin_tab[e128], False)
        write_entry(self.hca_comp, entry, pos, 128, due128)
        n_vis128 = torch.div(pos + 1, 128, rounding_mode="floor").to(torch.int32)
        self.hca_out = im.hca_decode(self.q, self.hca_window, window_len, self.hca_comp, n_vis128,
                                     self.hca_sinks, cos_q, sin_q)
        self.pos += 1
        # Graph replays in a timing loop would run past the caches: wrap back to the start.
        self.pos.copy_(torch.where(self.pos >= self.ctx, self.start_pos, self.pos))
        return self.csa_out, self.hca_out


def build(kernels: dict, device) -> DecodeStep:
    """harness/model/e2e.py's entry: the workload with `kernels` plugged in, the rest from kernel.py."""
    unknown = set(kernels) - set(TASKS)
    if unknown:
        raise ValueError(f"{__file__}: TASKS = {TASKS} does not take {sorted(unknown)}")
    on_gpu = str(device).startswith("cuda")
    model, ctx, batch = ("flash", 65536, 16) if on_gpu else ("tiny", 768, 2)
    w = DecodeStep(model, ctx, batch, device, load_impl("kernel", kernels), min_ctx=ctx // 2 if on_gpu else 127)
    w.description = f"V4 {model} decode step, CSA+HCA layer attention, ctx {ctx}, batch {batch}"
    return w


def clone_state(src: DecodeStep, impl: Impl) -> DecodeStep:
    """A second DecodeStep over copies of src's tensors, run by another Impl."""
    dst = object.__new__(DecodeStep)
    for k, v in vars(src).items():
        setattr(dst, k, v.clone() if isinstance(v, torch.Tensor) else v)
    dst.impl = impl
    return dst


def capture(stepper: DecodeStep, warmup: int = 2) -> "torch.cuda.CUDAGraph":
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):  # compiles the kernels; also advances pos like real steps
            stepper.step()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        stepper.step()
    return graph


def load_winners(specs: list[str], tasks: tuple[str, ...] | list[str] = TASKS) -> dict:
    """--kernel TASK=FILE, repeated: each task's kept kernel (a candidate file or an exported
    dispatcher defining the task's entry, named as the task) stacked into the step; the other tasks
    use kernel.py. bench/dsv4.py reads its --kernel with this too, over its own `tasks`."""
    out = {}
    for spec in specs:
        task, _, path = spec.partition("=")
        if task not in tasks:
            raise ValueError(f"--kernel {spec}: TASK must be one of {', '.join(tasks)}")
        if not Path(path).is_file():
            raise ValueError(f"--kernel {spec}: {path}: no such file")
        mod = _load(Path(path), f"e2e_winner_{task}")
        if not callable(getattr(mod, task, None)):
            raise ValueError(f"--kernel {spec}: {path} defines no function {task}()")
        out[task] = getattr(mod, task)
    return out


def compiled_reference() -> Impl:
    """The references, each under torch.compile (dynamic=False: a step's shapes never change): what a
    user gets from the PyTorch code without writing kernels. The glue between them stays eager."""
    return Impl(**{k: torch.compile(fn, dynamic=False) for k, fn in vars(load_impl("reference")).items()})


def worst_differences(kern: DecodeStep, others: dict[str, DecodeStep], steps: int) -> dict[str, float]:
    """Steps every stepper in lockstep from the same state; the largest |kernel - other| per other,
    inf where either side is not finite (max() would drop a NaN and report a perfect match)."""
    def diff(a, b) -> float:
        d = (a.float() - b.float()).abs().max().item()
        return d if math.isfinite(d) else math.inf

    worst = dict.fromkeys(others, 0.0)
    for _ in range(steps):
        ck, hk = kern.step()
        for name, st in others.items():
            cr, hr = st.step()
            worst[name] = max(worst[name], diff(ck, cr), diff(hk, hr))
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="flash")
    ap.add_argument("--ctx", type=int, default=65536)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--steps", type=int, default=8, help="eager steps compared kernel vs reference")
    ap.add_argument("--kernel", action="append", default=[], metavar="TASK=FILE",
                    help="a task's kept kernel stacked into the step (repeat per task); others use kernel.py")
    ap.add_argument("--no-compile", action="store_true", help="leave out the torch.compile'd references")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("e2e.py: needs a CUDA GPU (the CPU tests in tests/dsv4 run the step in the interpreter)", file=sys.stderr)
        return 2
    try:
        winners = load_winners(args.kernel)
    except ValueError as e:
        print(f"e2e.py: {e}", file=sys.stderr)
        return 2
    kern = DecodeStep(args.model, args.ctx, args.batch, "cuda", load_impl("kernel", winners))
    others = {"eager": clone_state(kern, load_impl("reference"))}
    if not args.no_compile:
        others["torch.compile"] = clone_state(kern, compiled_reference())
    worst = worst_differences(kern, others, args.steps)
    stacked = ", ".join(f"{t}={p}" for t, p in (k.partition("=")[::2] for k in args.kernel)) or "every task's kernel.py"
    print(f"e2e {args.model} ctx {args.ctx} batch {args.batch} ({stacked}): {args.steps} steps, max |kernels - "
          + ", ".join(f"{n}| = {w:.3g}" for n, w in worst.items()))
    import triton.testing
    times = {}
    for name, st in (*others.items(), ("kernels", kern)):
        graph = capture(st)  # compiles (Triton, and Inductor for torch.compile) in its warm-up steps
        times[name] = triton.testing.do_bench(graph.replay, warmup=10, rep=50, return_mode="median")
    print("CUDA-graph step (CSA+HCA layer attention): "
          + ", ".join(f"{n} {t * 1e3:.1f} us" for n, t in times.items())
          + "; kernels' speedup: " + ", ".join(f"{times[n] / times['kernels']:.2f}x over {n}" for n in others))
    # Beyond TOLERANCE's rtol as an absolute bound (outputs are ~1): a note, not a failure, since a near-tie
    # top-k choice moves the CSA output by more than rounding and the per-task evaluations are the
    # correctness gate. A non-finite output is a failure.
    far = [n for n, w in worst.items() if w > TOLERANCE[1]]
    if far:
        print(f"note: the kernels' step differs from {', '.join(far)} by more than {TOLERANCE[1]} somewhere")
    return 1 if any(math.isinf(w) for w in worst.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())

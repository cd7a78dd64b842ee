"""Every variant x every configuration of its declared space, on every shape: what a kernel
engineer's sweep finds, as % of the copy bandwidth, to judge the tuner's result against
(bench/variant_sweep.py is the command line; `apply` writes each variant's best as its defaults).

How, and why it fits in one device call: a variant's space has thousands of configurations (rows.py:
its long-row knobs times its short-row knobs), but on one shape most of them launch exactly the same
kernels (LONG_BLOCK does nothing to 512-wide rows). So each configuration's wrapper is first called
with every Triton launch intercepted and recorded (kernel, grid, arguments, constexprs, warps),
nothing run; configurations that record the same launches on a shape are timed once there (a kernel
that read a tuned module constant directly, not as an argument, would escape this: the tasks'
variants pass every one as an argument). The
distinct launches are compiled in worker processes (`kernel.warmup`, nothing launched, so the GPU
stays quiet) while this process times them as they become ready: triton.testing.do_bench, median, L2
flushed between calls, the same clock as bench/compare.py. Variants take turns, each one's defaults
first, then the rest in a seeded random order, so a run cut by its budget is an even sample.

It prints, per task: each shape's roofline time and best (variant, configuration, % of copy
bandwidth, and % of a clone of that shape's bytes timed the same way: its own ceiling), every variant's defaults and best per shape, what per-bucket keeps would hold (the best
configuration per bucket over that bucket's shapes), Liger-Kernel's figure where it imports, and
whether >= 80% of copy bandwidth is reached on every shape whose roofline time is >= 10 us.

torch and triton load with this module: bench/variant_sweep.py sets TRITON_INTERPRET (--interpreter)
before it imports it.
"""
from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import random
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import torch
from triton.runtime.jit import KernelInterface

from harness.agents.tunespace import ARCH, DEFAULT_SMEM_KIB, PER_SM, read_space
from harness.authoring.tasks import load_module, load_task
from harness.profiling.measure import do_bench_us

TARGET_PCT = 80.0
MIN_ROOFLINE_US = 10.0


class SweepError(RuntimeError):
    """The sweep can't go on (no Triton launch of a task's variants could be recorded)."""


@dataclass
class SweepOptions:
    """What to sweep and how to time it (bench/variant_sweep.py's options)."""
    interpreter: bool = False        # no GPU: the interpreter's shapes, correctness only
    variants: list[str] = field(default_factory=list)  # variant files or stems (none: every listed one)
    shapes: list[str] = field(default_factory=list)    # shape names (none: all)
    by: list[str] = field(default_factory=list)        # knobs: each variant's best per shape at each value
    limit: int | None = None         # at most this many configurations a variant
    seed: int = 0
    warmup_ms: int = 5
    rep_ms: int = 30

    def bench_us(self, fn) -> float:
        return do_bench_us(fn, self.rep_ms, self.warmup_ms)


# -- recording launches without running them -------------------------------------------------------
class _Recorder:
    """Intercepts `kernel[grid](...)` (Triton's KernelInterface.__getitem__): records, or compiles
    without launching (warmup), or lets the launch through."""

    def __init__(self):
        self.cls = KernelInterface
        self.orig = KernelInterface.__getitem__
        self.mode = "pass"
        self.log: list = []

    def __enter__(self):
        rec = self

        def getitem(kernel, grid):
            if rec.mode == "pass":
                return rec.orig(kernel, grid)

            def launch(*args, **kwargs):
                if rec.mode == "record":
                    rec.log.append(_launch_key(kernel, grid, args, kwargs))
                else:  # "compile": build the binary the real launch would use, run nothing
                    kernel.warmup(*args, grid=grid, **kwargs)
            return launch
        self.cls.__getitem__ = getitem
        return self

    def __exit__(self, *exc):
        self.cls.__getitem__ = self.orig


def _launch_key(kernel, grid, args, kwargs) -> tuple:
    fn = getattr(kernel, "fn", kernel)
    code = getattr(fn, "__code__", None)
    # The kernel's text (JITFunction.src) or bytecode: the same kernel from two rendered modules matches.
    body = getattr(kernel, "src", None) or (code.co_code, code.co_names) if code else str(fn)
    ident = (getattr(fn, "__name__", str(fn)), hash(body))
    if callable(grid):
        grid = grid(dict(kwargs))
    norm = tuple(("T", tuple(a.shape), tuple(a.stride()), str(a.dtype)) if isinstance(a, torch.Tensor)
                 else a for a in args)
    kw = tuple(sorted((k, ("T", tuple(v.shape), str(v.dtype)) if isinstance(v, torch.Tensor) else v)
                      for k, v in kwargs.items()))
    return (ident, tuple(grid), norm, kw)


# -- the search space ------------------------------------------------------------------------------
def limits_here(on_gpu: bool) -> dict:
    smem = DEFAULT_SMEM_KIB * 1024
    per_sm = dict(PER_SM)
    if on_gpu:
        p = torch.cuda.get_device_properties(0)
        smem = int(getattr(p, "shared_memory_per_block_optin", 0) or smem)
        per_sm = {"regs_per_sm": int(getattr(p, "regs_per_multiprocessor", 0) or PER_SM["regs_per_sm"]),
                  "smem_per_sm": int(getattr(p, "shared_memory_per_multiprocessor", 0) or PER_SM["smem_per_sm"]),
                  "warps_per_sm": int(getattr(p, "max_threads_per_multi_processor", 0) or 32 * PER_SM["warps_per_sm"]) // 32}
    return {**ARCH, **per_sm, "smem_per_block": smem}


def configurations(task, limits: dict, only: set[str], limit: int | None, seed: int) -> list[dict]:
    """[{variant, config, default, path}] with each variant's defaults first, then a seeded shuffle."""
    listed = (task.raw or {}).get("variants") or ["kernel.py"]
    out = []
    tmp = Path(tempfile.mkdtemp(prefix=f"sweep_{task.name}_"))
    for rel in listed:
        if only and Path(rel).stem not in only and rel not in only:
            continue
        space = read_space((task.root / rel).read_text(), rel)
        grid = space.grid(limits)
        default = space.default()
        rest = [c for c in grid if c != default]
        random.Random(seed).shuffle(rest)
        chosen = ([default] if space.feasible(default, limits) is None else []) + rest
        if limit:
            chosen = chosen[:limit]
        # Every knob a module constant (rows.py's TILE...): one module, its constants set per
        # configuration, records the launches (the wrapper reads them at call time); loading
        # thousands of modules would take a good part of the budget.
        const_only = all(k.key.startswith("const:") for prm in space.params for k in prm.knobs)
        for i, config in enumerate(chosen):
            path = tmp / f"{Path(rel).stem}_{i:05d}.py"
            path.write_text(space.render(config))
            out.append({"variant": rel, "config": config, "default": config == default, "path": str(path),
                        "space": len(grid), "const_only": const_only})
    return out


# -- worker processes: compile only ----------------------------------------------------------------
_W: dict = {}


def _worker_compile(task_name: str, shape_i: int, path: str, device: str = "cuda") -> str | None:
    try:
        if task_name not in _W:
            task = load_task(task_name, check_null=False)
            _W[task_name] = (task, task.load_reference(), {})
        task, ref, inputs = _W[task_name]
        if shape_i not in inputs:  # kept: jobs move between shapes
            shape = (task.shapes if device == "cuda" else task.interpreter_shapes)[shape_i]
            inputs[shape_i] = ref.make_inputs(shape.dims, getattr(torch, task.dtypes[0]), 0, device)
        fn = getattr(load_module(Path(path), f"sweepw_{Path(path).stem}_{os.getpid()}"), task.entry)
        with _Recorder() as r:
            r.mode = "compile"
            fn(*inputs[shape_i])
        return None
    except Exception as e:  # noqa: BLE001 - reported against the configuration, the sweep goes on
        return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


# -- Liger-Kernel, where it imports ------------------------------------------------------------------
def liger_fn(task_name: str):
    """(callable, None) or (None, why not): Liger-Kernel's forward for this task."""
    try:
        if task_name == "softmax":  # Liger-Kernel is optional: a figure to compare with, where it imports
            from liger_kernel.ops.softmax import LigerSoftmaxFunction
            return (lambda x: LigerSoftmaxFunction.apply(x)), None
        if task_name == "rmsnorm":
            from liger_kernel.ops.rms_norm import LigerRMSNormFunction  # optional, as above
            # Liger's default casting ("llama": the inverse RMS in fp32), eps as the reference's.
            return (lambda x, w: LigerRMSNormFunction.apply(x, w, 1e-6, 0.0, "llama", False)), None
    except Exception as e:  # noqa: BLE001 - not installed or not importable here: said, not fatal
        return None, f"liger-kernel not importable ({type(e).__name__}: {str(e)[:120]})"
    return None, f"no Liger-Kernel op for task {task_name}"


# -- the sweep ---------------------------------------------------------------------------------------
def correct(task, out, exp) -> bool:
    tol = task.tolerance[task.dtypes[0]]
    if not isinstance(out, torch.Tensor) or out.shape != exp.shape or out.dtype != exp.dtype:
        return False
    of, ef = out.float(), exp.float()
    return bool(torch.isfinite(of).all()) and not bool(((of - ef).abs() > tol.atol + tol.rtol * ef.abs()).any())


def sweep_task(task_name: str, opts: SweepOptions, pool, t_end: float, bw_gbs: float | None) -> dict:
    on_gpu = not opts.interpreter
    task = load_task(task_name, check_null=False)
    ref = task.load_reference()
    dtype = getattr(torch, task.dtypes[0])
    dev = "cuda" if on_gpu else "cpu"
    shapes = task.shapes if on_gpu else task.interpreter_shapes
    if opts.shapes:
        shapes = [s for s in shapes if s.name in set(opts.shapes)]
    t0 = time.time()
    confs = configurations(task, limits_here(on_gpu), set(opts.variants), opts.limit, opts.seed)
    loaded: dict[str, object] = {}

    def module(path: str):
        if path not in loaded:
            loaded[path] = load_module(Path(path), f"sweep_{task.name}_{Path(path).stem}")
        return loaded[path]

    first = {}  # variant -> its first configuration's path: the module whose constants are set
    for c in confs:
        first.setdefault(c["variant"], c["path"])

    def recorder_fn(c: dict):
        if not c["const_only"]:
            return getattr(module(c["path"]), task.entry)
        mod = module(first[c["variant"]])
        for k, v in c["config"].items():
            setattr(mod, k, v)
        return getattr(mod, task.entry)
    # Record each configuration's launches per shape; one representative per distinct launch set.
    keyed: dict[tuple, list[int]] = {}  # (shape index, launches) -> indices into confs
    errors: dict[tuple, str] = {}
    for si, shape in enumerate(shapes):
        inputs = ref.make_inputs(shape.dims, dtype, 0, dev)
        with _Recorder() as r:
            r.mode = "record"
            for ci, c in enumerate(confs):
                r.log = []
                try:
                    recorder_fn(c)(*inputs)
                except Exception as e:  # noqa: BLE001
                    errors[(si, ci)] = f"{type(e).__name__}: {str(e)[:200]}"
                    continue
                if not r.log:  # launched some other way than kernel[grid](...): can't be deduplicated
                    errors[(si, ci)] = "no Triton launch recorded"
                    continue
                keyed.setdefault((si, tuple(r.log)), []).append(ci)
        if sum(1 for (sj, _), e in errors.items() if sj == si and e == "no Triton launch recorded") == len(confs):
            raise SweepError(f"no launch of {task.name}'s variants was recorded on "
                             f"{shape.name}: this Triton launches kernels past KernelInterface.__getitem__")
        del inputs
    # Variants take turns (each one's defaults first, then its shuffled order), so a run cut by the
    # budget has an even sample of every variant, not all of the first and none of the last.
    per_variant: dict[str, list] = {}
    for kv in sorted(keyed.items(), key=lambda kv: min(kv[1])):
        per_variant.setdefault(confs[min(kv[1])]["variant"], []).append(kv)
    queues = list(per_variant.values())
    jobs = [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]
    for path in {first[v] for v in first}:  # their constants were moved: timed from fresh modules
        loaded.pop(path, None)
    print(f"{task.name}: {len(confs)} configurations over {len({c['variant'] for c in confs})} variants, "
          f"{len(jobs)} distinct launch sets on {len(shapes)} shapes (recorded in {time.time() - t0:.1f} s)",
          flush=True)

    # Compile in the workers (ahead of the timing), time here as each becomes ready.
    shape_index = {s.name: i for i, s in enumerate(task.shapes if on_gpu else task.interpreter_shapes)}
    futures = []
    if pool is not None:
        for (si, _), cis in jobs:
            futures.append(pool.submit(_worker_compile, task.name, shape_index[shapes[si].name], confs[cis[0]]["path"],
                                       dev))
    results: dict[tuple, dict] = {}  # (shape index, conf index) -> {"us", "correct", "error"}
    cache: dict[int, tuple] = {}
    timed = skipped = 0
    worker_errors: list[str] = []
    for j, ((si, _), cis) in enumerate(jobs):
        if time.time() > t_end:
            skipped = len(jobs) - j
            break
        if futures:  # a worker that could not compile it ahead: this process compiles it itself
            try:
                werr = futures[j].result()
            except Exception as e:  # noqa: BLE001 - a broken pool costs speed, not results
                werr = f"{type(e).__name__}: {e}"
            if werr:
                worker_errors.append(werr)
        rep = confs[cis[0]]
        res = {"us": None, "correct": None, "error": None}
        if si not in cache:  # every shape's inputs and expected output kept: jobs move between shapes
            x = ref.make_inputs(shapes[si].dims, dtype, 0, dev)
            cache[si] = (x, ref.reference(*x))
        inputs, expected = cache[si]
        fn = getattr(module(rep["path"]), task.entry)
        try:
            out = fn(*inputs)
            res["correct"] = correct(task, out, expected)
            del out
            if on_gpu and res["correct"]:
                res["us"] = opts.bench_us(lambda: fn(*inputs))
                timed += 1
        except Exception as e:  # noqa: BLE001
            res["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        for ci in cis:
            results[(si, ci)] = res
    for f in futures[len(jobs) - skipped:]:
        f.cancel()
    cache.clear()
    inputs = expected = None
    if on_gpu:
        torch.cuda.empty_cache()
    if worker_errors:
        print(f"{task.name}: {len(worker_errors)} launch sets not compiled ahead by the workers (compiled here "
              f"instead); first: {worker_errors[0][:200]}")

    # A copy of the shape's bytes (read half, write half: x.clone() for softmax), same clock: the
    # ceiling this shape can reach, beside the copy bandwidth measured on 1 GiB.
    clone_us = {}
    for si, shape in enumerate(shapes):
        if not on_gpu or not hasattr(ref, "bytes_moved"):
            break
        src = torch.empty(max(1, ref.bytes_moved(shape.dims, dtype) // 2), dtype=torch.uint8, device=dev)
        clone_us[si] = opts.bench_us(lambda: src.clone())
        del src

    # Liger, same clock.
    liger = {}
    lfn, why = liger_fn(task.name) if on_gpu else (None, "not on the interpreter")
    for si, shape in enumerate(shapes):
        if lfn is None:
            break
        x = ref.make_inputs(shape.dims, dtype, 0, dev)
        try:
            with torch.no_grad():
                ok = correct(task, lfn(*x), ref.reference(*x))
                us = opts.bench_us(lambda: lfn(*x)) if ok else None
            liger[si] = {"us": us, "correct": ok, "error": None}
        except Exception as e:  # noqa: BLE001 - Liger fails on 128k rows: recorded, not fatal
            liger[si] = {"us": None, "correct": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
        del x
    return report(task, ref, dtype, shapes, confs, results, errors, liger, why, bw_gbs, timed, skipped, clone_us,
                  list(opts.by))


def _geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def _label(c: dict) -> str:
    return f"{Path(c['variant']).stem} " + (" ".join(f"{k}={v}" for k, v in c["config"].items()) or "-")


def landscape(shapes, confs, results, errors, roof) -> list[dict]:
    """Every configuration with its time on each shape (None: not timed, wrong or failed, said in `bad`):
    what the tuner's search is developed and tested against on the CPU (issue 36, tests/fixtures)."""
    rows = []
    for ci, c in enumerate(confs):
        us, bad = {}, {}
        for si, s in enumerate(shapes):
            r = results.get((si, ci))
            us[s.name] = r["us"] if r else None
            if (si, ci) in errors:
                bad[s.name] = errors[(si, ci)]
            elif r and (r["correct"] is False or r["error"]):
                bad[s.name] = r["error"] or "incorrect"
        rows.append({"variant": c["variant"], "config": c["config"], "default": c["default"], "us": us,
                     **({"bad": bad} if bad else {})})
    return rows


def report(task, ref, dtype, shapes, confs, results, errors, liger, liger_why, bw_gbs, timed, skipped,
           clone_us=None, by=()) -> dict:
    clone_us = clone_us or {}
    roof = {si: (ref.bytes_moved(s.dims, dtype) / (bw_gbs * 1e9) * 1e6 if bw_gbs and hasattr(ref, "bytes_moved")
                 else None) for si, s in enumerate(shapes)}

    def pct(si, us):
        return 100 * roof[si] / us if us and roof[si] else None

    def fmt(p, us=None):
        return "-" if us is None else (f"{p:.0f}%" if p is not None else f"{us:.1f}us")

    n_ok = len({id(r) for r in results.values() if r["correct"]})
    n_bad = len({id(r) for r in results.values() if r["correct"] is False})
    n_err = len(errors) + len({id(r) for r in results.values() if r["error"]})
    print(f"{task.name}: {n_ok} distinct launch sets correct, {n_bad} incorrect, {n_err} errors; {timed} timed, "
          f"{skipped} left untimed (budget)" + (f"; copy bandwidth {bw_gbs:.0f} GB/s" if bw_gbs else ""))
    for (si, ci), e in list(errors.items())[:3]:
        print(f"  error: {_label(confs[ci])} on {shapes[si].name}: {e}")
    for (si, ci), r in [kv for kv in results.items() if kv[1]["correct"] is False][:3]:
        print(f"  INCORRECT: {_label(confs[ci])} on {shapes[si].name}")
    variants = list(dict.fromkeys(c["variant"] for c in confs))
    out = {"task": task.name, "copy_gbs": bw_gbs, "shapes": [], "variants": {}, "buckets": [], "liger": {},
           "correct": n_ok, "incorrect": n_bad, "errors": n_err, "timed": timed, "untimed": skipped,
           "landscape": landscape(shapes, confs, results, errors, roof)}
    if not timed:  # the interpreter: correctness was the point, there is no table of times
        out["shapes"] = [{"shape": s.name, "per_variant": {v: {} for v in variants}} for s in shapes]
        return out
    # Per shape: the best of all, and each variant's defaults and best.
    # %copy: of the roofline time at the 1 GiB copy bandwidth; copy us / %clone: a clone of this
    # shape's bytes (its own ceiling: small shapes don't reach the 1 GiB figure either).
    print(f"{'shape':<26}{'roof us':>8}{'copy us':>8}{'best us':>9}{'%copy':>7}{'%clone':>7}  best configuration")
    for si, s in enumerate(shapes):
        mine = [(r["us"], ci) for (sj, ci), r in results.items() if sj == si and r["us"]]
        best = min(mine) if mine else None
        row = {"shape": s.name, "roofline_us": roof[si], "best_us": best[0] if best else None,
               "best_pct": pct(si, best[0]) if best else None, "best": _label(confs[best[1]]) if best else None,
               "copy_us": clone_us.get(si),
               "best_pct_of_clone": 100 * clone_us[si] / best[0] if best and clone_us.get(si) else None,
               "per_variant": {}}
        for v in variants:
            vs = [(us, ci) for us, ci in mine if confs[ci]["variant"] == v]
            d = next((results.get((si, ci), {}).get("us") for ci, c in enumerate(confs)
                      if c["variant"] == v and c["default"]), None)
            vb = min(vs) if vs else None
            row["per_variant"][v] = {"default_us": d, "default_pct": pct(si, d),
                                     "best_us": vb[0] if vb else None, "best_pct": pct(si, vb[0]) if vb else None,
                                     "best": _label(confs[vb[1]]) if vb else None}
        out["shapes"].append(row)
        clone = f"{row['best_pct_of_clone']:.0f}%" if row["best_pct_of_clone"] is not None else "-"
        print(f"{s.name[:26]:<26}{(roof[si] or 0):>8.1f}"
              + (f"{clone_us[si]:>8.1f}" if si in clone_us else f"{'-':>8}")
              + f"{(best[0] if best else 0):>9.1f}{fmt(row['best_pct'], row['best_us']):>7}{clone:>7}"
              f"  {row['best'] or '-'}")
    print(f"{'per variant (% copy)':<26}" + "".join(f"{s.name[:16]:>18}" for s in shapes))
    for v in variants:
        cells_d = [fmt(r["per_variant"][v]["default_pct"], r["per_variant"][v]["default_us"]) for r in out["shapes"]]
        cells_b = [fmt(r["per_variant"][v]["best_pct"], r["per_variant"][v]["best_us"]) for r in out["shapes"]]
        print(f"{Path(v).stem[:14] + ' defaults':<26}" + "".join(f"{c:>18}" for c in cells_d))
        print(f"{Path(v).stem[:14] + ' best':<26}" + "".join(f"{c:>18}" for c in cells_b))
        # The single configuration of this variant best over every shape (geomean): its new defaults.
        full = {}
        for (si, ci), r in results.items():
            if confs[ci]["variant"] == v and r["us"]:
                full.setdefault(ci, {})[si] = r["us"]
        whole = [(_geo(list(t.values())), ci) for ci, t in full.items() if len(t) == len(shapes)]
        if whole:
            g, ci = min(whole)
            out["variants"][v] = {"best_overall": confs[ci]["config"], "space": confs[ci]["space"],
                                  "pct": [pct(si, full[ci][si]) for si in range(len(shapes))]}
            print(f"  {Path(v).stem} best on every shape together: {_label(confs[ci])}: "
                  + " | ".join(fmt(pct(si, full[ci][si]), full[ci][si]) for si in range(len(shapes))))
    # Per value of a knob (--by PER_SM): each variant that has it, its best per shape at each value, so a
    # new setting is judged beside the old ones in the same run.
    out["by"] = {}
    for knob in by:
        for v in variants:
            values = sorted({c["config"][knob] for c in confs if c["variant"] == v and knob in c["config"]})
            for val in values:
                cells = []
                for si in range(len(shapes)):
                    ts = [r["us"] for (sj, ci), r in results.items() if sj == si and r["us"]
                          and confs[ci]["variant"] == v and confs[ci]["config"].get(knob) == val]
                    cells.append(min(ts) if ts else None)
                out["by"].setdefault(knob, {}).setdefault(v, {})[val] = [pct(si, us) for si, us in enumerate(cells)]
                print(f"{(Path(v).stem[:14] + f' {knob}={val}')[:26]:<26}"
                      + "".join(f"{fmt(pct(si, us), us):>18}" for si, us in enumerate(cells)))
    # Per bucket: what per-bucket keeps would hold (one configuration per bucket, geomean over its shapes).
    buckets = task.buckets or []
    for b in buckets:
        sis = [si for si, s in enumerate(shapes) if b.contains(s.dims)]
        if not sis:
            continue
        full = {}
        for (si, ci), r in results.items():
            if si in sis and r["us"]:
                full.setdefault(ci, {})[si] = r["us"]
        whole = [(_geo(list(t.values())), ci) for ci, t in full.items() if len(t) == len(sis)]
        if whole:
            g, ci = min(whole)
            out["buckets"].append({"bucket": b.name, "config": _label(confs[ci]),
                                   "pct": {shapes[si].name: pct(si, full[ci][si]) for si in sis}})
            print(f"bucket {b.name}: {_label(confs[ci])}: "
                  + " | ".join(f"{shapes[si].name} {fmt(pct(si, full[ci][si]), full[ci][si])}" for si in sis))
    if liger:
        for si, r in liger.items():
            out["liger"][shapes[si].name] = {**r, "pct": pct(si, r["us"])}
        print("Liger-Kernel: " + " | ".join(
            f"{shapes[si].name} {fmt(pct(si, r['us']), r['us']) if r['us'] else ('FAILS' if r['error'] else 'incorrect')}"
            for si, r in liger.items()))
    elif liger_why:
        print(f"Liger-Kernel not measured: {liger_why}")
    big = [r for r in out["shapes"] if (r["roofline_us"] or 0) >= MIN_ROOFLINE_US]
    if big and bw_gbs:
        ok = [r for r in big if (r["best_pct"] or 0) >= TARGET_PCT]
        lig = [r for r in out["shapes"] if out["liger"].get(r["shape"], {}).get("us")]
        beat = [r for r in lig if r["best_us"] and r["best_us"] <= out["liger"][r["shape"]]["us"]]
        out["verdict"] = {"at_target": len(ok), "counted": len(big), "beats_liger": len(beat), "liger_timed": len(lig)}
        print(f"{task.name} VERDICT: best per shape >= {TARGET_PCT:.0f}% of copy bandwidth on {len(ok)}/{len(big)} "
              f"shapes with a roofline time >= {MIN_ROOFLINE_US:.0f} us"
              + (f"; at or faster than Liger on {len(beat)}/{len(lig)}" if lig else "")
              + "; shorter shapes (launch-bound) not counted: "
              + (", ".join(r["shape"] for r in out["shapes"] if r not in big) or "none"))
    return out


def apply(path: Path) -> int:
    """Write each variant's best configuration over every shape (from a sweep's JSON) into its
    declared literals: the defaults the tuner tries first. Only literals move; the files stay
    otherwise as they were (the diff shows what the sweep chose)."""
    try:
        report = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        print(f"{path}: not a sweep's JSON ({e})", file=sys.stderr)
        return 2
    for r in report:
        task = load_task(r["task"], check_null=False)
        for rel, v in r.get("variants", {}).items():
            f = task.root / rel
            space = read_space(f.read_text(), rel)
            config = {k: val for k, val in v["best_overall"].items() if k in space.default()}
            if config == space.default():
                print(f"{task.name}/{rel}: defaults already the sweep's best")
                continue
            f.write_text(space.render(config))
            print(f"{task.name}/{rel}: defaults now " + " ".join(f"{k}={val}" for k, val in config.items()))
    return 0




def sweep(tasks: list[str], opts: SweepOptions, deadline: float, workers: int, bw_gbs: float | None) -> list[dict]:
    """sweep_task for each task in turn, each given an even share of what is left until `deadline`;
    `workers` spawned processes compile ahead of the timing (none: this process compiles)."""
    # On the interpreter too when asked: the plumbing is the same, nothing compiles.
    pool = ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) if workers > 0 else None
    report_all = []
    try:
        for i, t in enumerate(tasks):
            t_end = time.time() + (deadline - time.time()) / (len(tasks) - i)
            report_all.append(sweep_task(t, opts, pool, t_end, bw_gbs))
    finally:
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
    return report_all

"""Per-shape dispatch on a GPU: a kernel that wins on part of the range, kept for those buckets only,
exported as a dispatcher, and the dispatcher measured against the default and each single kernel.

    PYTHONPATH=. python bench/dispatch.py softmax --kernel kernels/softmax/candidates/onepass.py \
        [--buckets "short:cols:1:1025,mid:cols:1025:16385,long:cols:16385:"] \
        [--sweep cols=256,512,...] [--out dispatch_softmax.py] [--json out.json]
    PYTHONPATH=. python bench/dispatch.py softmax --check dispatch_softmax.py   # an exported file

Steps (first form): time each --kernel against the task's default (--against baseline: kernel.py) on
every shape (task shapes + sweep); build a real session in a temporary folder whose candidates carry
these verdicts; keep each candidate for the buckets it wins (harness.model.dispatch.bucket_results, the
`--keep-buckets auto` policy; the faster of two winners keeps a bucket); export the session's
dispatcher; then measure it. Measurement (second
form too): per shape, default / each kernel in the table / dispatcher: correct?, eager time
(triton.testing.do_bench, L2 flushed), CUDA-graph replay time (do_bench_cudagraph), graph capture
and replay equal to eager. Needs only torch + triton (no textual, no tree-sitter) and git.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from harness.model import dispatch as d  # noqa: E402
from harness.profiling.measure import capture_graph  # noqa: E402
from harness.authoring.tasks import Bucket, Shape, Task, compare, load_module, load_task  # noqa: E402


def parse_buckets(spec: str) -> list[Bucket]:
    out = []
    for part in (p for p in spec.split(",") if p.strip()):
        name, dim, lo, hi = (part.split(":") + ["", "", "", ""])[:4]
        out.append(Bucket(name.strip(), dim.strip(), int(lo or 0), int(hi) if hi else 2**62))
    return out


def sweep_shapes(task: Task, spec: str) -> list[Shape]:
    if not spec:
        return []
    dim, _, values = spec.partition("=")
    base = task.shapes[0].dims
    return [Shape(f"{dim}={v}", {**base, dim: int(v)}) for v in values.split(",") if v]


DEVICE = "cuda"
DRY_RUN = False  # --dry-run: the plumbing on a CPU (Triton interpreter, wall clock); never kernel speeds


def _wall_us(fn, inputs, reps: int = 3) -> float:
    import statistics
    import time

    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*inputs)
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(out)


def _time(fn, inputs) -> tuple[float | None, float | None, str | None]:
    """(eager us, graph us, error): medians, L2 flushed between reps by do_bench."""
    if DRY_RUN:
        try:
            us = _wall_us(fn, inputs)
        except Exception as e:
            return None, None, f"{type(e).__name__}: {str(e)[:160]}"
        return us, us, None
    import triton.testing

    try:
        fn(*inputs)
        torch.cuda.synchronize()
        eager = triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=100, return_mode="median") * 1e3
    except Exception as e:  # a kernel that can't run a shape loses it, with the reason shown
        return None, None, f"{type(e).__name__}: {str(e)[:160]}"
    try:
        graph = triton.testing.do_bench_cudagraph(lambda: fn(*inputs), rep=100, return_mode="median") * 1e3
    except Exception as e:
        return eager, None, f"graph: {type(e).__name__}: {str(e)[:160]}"
    return eager, graph, None


def _graph_replay_matches(fn, inputs) -> bool:
    if DRY_RUN:  # no graphs on a CPU: only that two eager calls agree
        return bool(torch.equal(fn(*inputs), fn(*inputs)))
    out = fn(*inputs)
    torch.cuda.synchronize()
    g, captured = capture_graph(lambda: fn(*inputs), warmup=1)
    g.replay()
    torch.cuda.synchronize()
    return bool(torch.equal(captured, out))


def measure_dispatcher(task: Task, path: Path, shapes: list[Shape] | None = None) -> list[dict]:
    """Per shape: the dispatcher against the default and every kernel of its table."""
    mod = load_module(Path(path), "warpsmith_bench_dispatcher")
    ref = task.load_reference()
    dtype = getattr(torch, task.dtypes[0])
    impls = mod.kernels()  # {label: fn}, the default included
    rows = []
    for shape in shapes or task.shapes:
        inputs = ref.make_inputs(shape.dims, dtype, 0, DEVICE)
        expected = ref.reference(*inputs)
        bucket, routed = mod.route(*inputs)
        row = {"shape": shape.name, "dims": shape.dims, "bucket": bucket, "routed": routed, "kernels": {}}
        for label, fn in list(impls.items()) + [("dispatcher", getattr(mod, task.entry))]:
            eager, graph, err = _time(fn, inputs)
            ok = None
            if err is None or err.startswith("graph"):
                ok = compare(task, ref, fn(*inputs), expected, inputs, task.dtypes[0]) is None
            row["kernels"][label] = {"eager_us": eager, "graph_us": graph, "correct": ok, "error": err}
        disp = row["kernels"]["dispatcher"]
        singles = {k: v for k, v in row["kernels"].items() if k != "dispatcher" and v["correct"] and v["graph_us"]}
        best = min(singles.items(), key=lambda kv: kv[1]["graph_us"]) if singles else (None, {})
        row["best_single"], row["best_single_us"] = best[0], best[1].get("graph_us")
        row["dispatch_us"] = disp["graph_us"]
        row["default_us"] = row["kernels"]["default"]["graph_us"]
        try:
            row["graph_ok"] = _graph_replay_matches(getattr(mod, task.entry), inputs)
        except Exception as e:
            row["graph_ok"], row["graph_error"] = False, f"{type(e).__name__}: {e}"
        row["correct"] = bool(disp["correct"])
        rows.append(row)
        del inputs, expected
        if not DRY_RUN:
            torch.cuda.empty_cache()
    return rows


def print_rows(rows: list[dict]) -> None:
    labels = list(rows[0]["kernels"]) if rows else []
    head = f"{'shape':<22} {'bucket':<12} {'routed to':<26}" + "".join(f" {lb[:20]:>20}" for lb in labels)
    print("graph-replay us per call (eager us in brackets); * = fastest single implementation")
    print(head + f" {'vs default':>10} {'vs best':>8} graph")
    for r in rows:
        cells = []
        for lb in labels:
            k = r["kernels"][lb]
            if k["graph_us"] is None:
                cells.append(f" {'ERR' if k['error'] else '-':>20}")
                continue
            star = "*" if lb == r["best_single"] else " "
            cells.append(f" {k['graph_us']:>9.1f}{star}({k['eager_us']:>8.1f})")
        vs_def = f"{r['default_us'] / r['dispatch_us']:.3f}x" if r["dispatch_us"] and r["default_us"] else "n/a"
        vs_best = f"{r['best_single_us'] / r['dispatch_us']:.3f}x" if r["dispatch_us"] and r["best_single_us"] else "n/a"
        print(f"{r['shape'][:22]:<22} {str(r['bucket'])[:12]:<12} {r['routed'][:26]:<26}" + "".join(cells)
              + f" {vs_def:>10} {vs_best:>8} {'ok' if r['graph_ok'] else 'FAIL'}"
              + ("" if r["correct"] else "  INCORRECT"))


def default_fn(task: Task):
    """The task's default implementation (what the dispatcher falls back to)."""
    import importlib

    mod, fn, src = d._default_spec(task)
    if src is not None:
        return getattr(load_module(task.root / (mod.replace(".", "/") + ".py"), "warpsmith_bench_default"), fn)
    return getattr(importlib.import_module(mod), fn)


def bucket_summary(rows: list[dict]) -> list[dict]:
    """Per bucket: geomean graph time of every implementation over the bucket's shapes."""
    out = []
    for b in dict.fromkeys(r["bucket"] for r in rows):
        mine = [r for r in rows if r["bucket"] == b]
        labels = list(mine[0]["kernels"])
        g = {}
        for lb in labels:
            ts = [r["kernels"][lb]["graph_us"] for r in mine]
            ok = all(t and r["kernels"][lb]["correct"] for t, r in zip(ts, mine))
            g[lb] = math.exp(sum(math.log(t) for t in ts) / len(ts)) if ok else None
        out.append({"bucket": b, "shapes": [r["shape"] for r in mine], "routed": mine[0]["routed"], "geomean_us": g})
    return out


def print_buckets(summary: list[dict]) -> None:
    print("per bucket, geomean graph-replay us over its shapes:")
    for s in summary:
        cells = ", ".join(f"{lb} {us:.1f}" if us else f"{lb} n/a" for lb, us in s["geomean_us"].items())
        print(f"  {str(s['bucket']):<12} -> {s['routed']:<24} {cells}")


def build_session(task: Task, kernels: list[Path], shapes: list[Shape], base: Path, against: str = "default"):
    """A real session whose verdicts are this GPU's measurements, candidates kept per winning bucket.

    Each kernel is timed against `against` (the task's default: a bucket routes to a kernel only where
    it beats what users run otherwise; or the baseline kernel.py). Where two kernels win one bucket,
    the faster (bucket geomean) keeps it."""
    from harness.sessions.session import Session

    ref = task.load_reference()
    dtype = getattr(torch, task.dtypes[0])
    baseline = (default_fn(task) if against == "default"
                else getattr(load_module(task.baseline_path, "warpsmith_bench_baseline"), task.entry))
    session = Session.create(task.name, "bench", task.baseline_path.read_text(), base=base)
    ws = session.workspace
    holder_us: dict[str, float] = {}
    for it, kpath in enumerate(kernels, 1):
        fn = getattr(load_module(kpath, f"warpsmith_bench_k{it}"), task.entry)
        vshapes = []
        for shape in shapes:
            inputs = ref.make_inputs(shape.dims, dtype, 0, DEVICE)
            expected = ref.reference(*inputs)
            c_eager, c_graph, c_err = _time(fn, inputs)
            i_eager, i_graph, _ = _time(baseline, inputs)
            ok = c_err is None and compare(task, ref, fn(*inputs), expected, inputs, task.dtypes[0]) is None
            vshapes.append({"name": shape.name, "dims": shape.dims, "long": shape.long, "correct": ok,
                            "error": c_err, "candidate_us": c_graph, "incumbent_us": i_graph,
                            "speedup": (i_graph / c_graph) if ok and c_graph and i_graph else None})
            print(f"  {kpath.name} {shape.name:<22} candidate {c_graph or float('nan'):8.1f} us  {against} "
                  f"{i_graph or float('nan'):8.1f} us  {'ok' if ok else 'FAIL ' + str(c_err)}")
            del inputs, expected
            if not DRY_RUN:
                torch.cuda.empty_cache()
        sp = [s["speedup"] for s in vshapes if s["speedup"]]
        verdict = {"accepted": all(s["correct"] for s in vshapes), "stage": "done", "reasons": [], "shapes": vshapes,
                   "timing_available": True, "geomean_speedup": math.exp(sum(map(math.log, sp)) / len(sp)) if sp else None,
                   "recommendation": {"action": "revert", "reason": "bench: per-bucket keeps only", "can_keep": True}}
        commit = ws.commit_candidate(kpath.read_text(), it, kpath.stem)
        session.record({"kind": "CandidateProposed", "iteration": it, "commit": commit, "description": kpath.stem,
                        "agent": "bench", "model": "", "diff": "", "source": ""})
        session.record({"kind": "EvalResult", "iteration": it, "verdict": verdict})
        results = {r.bucket: r for r in d.bucket_results(task, verdict, margin=0.02)}
        wins = [b for b, r in results.items() if r.wins and r.candidate_us
                and r.candidate_us < holder_us.get(b, float("inf"))]
        holder_us.update({b: results[b].candidate_us for b in wins})
        session.record({"kind": "Decision", "iteration": it, "action": "revert", "by": "auto", "override": False,
                        "reason": "kept for buckets only" if wins else "", "commit": commit, "best": ws.best})
        if wins:
            d.keep_for_buckets(session, it, commit, wins, task, verdict, by="auto", reason="--keep-buckets auto")
        print(f"  {kpath.name}: wins {wins or 'no bucket'}")
    return session


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--kernel", action="append", default=[], type=Path, help="candidate file(s)")
    ap.add_argument("--check", type=Path, default=None, help="measure an already exported dispatcher")
    ap.add_argument("--buckets", default="", help="name:dim:lo:hi,... (overrides task.toml [[buckets]])")
    ap.add_argument("--sweep", default="", help="DIM=v1,v2,... extra shapes from the first shape's dims")
    ap.add_argument("--out", type=Path, default=None, help="where to write the dispatcher (default: temp)")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--against", choices=["default", "baseline"], default="default",
                    help="what each kernel must beat to be kept for a bucket (default: the task's default)")
    ap.add_argument("--dry-run", action="store_true",
                    help="check the plumbing on a CPU: Triton interpreter, interpreter shapes, wall clock (not speeds)")
    args = ap.parse_args()
    global DEVICE, DRY_RUN
    if args.dry_run:
        import os

        os.environ.setdefault("TRITON_INTERPRET", "1")
        DEVICE, DRY_RUN = "cpu", True
        print("DRY RUN: CPU wall clock of the Triton interpreter; these are not kernel speeds")
    elif not torch.cuda.is_available():
        print("bench/dispatch.py needs a CUDA GPU (timing and graph capture)", file=sys.stderr)
        return 2
    task = load_task(args.task, check_null=False)
    if args.buckets:
        task.buckets = parse_buckets(args.buckets)
    if not task.buckets:
        print(f"{task.toml_path}: no [[buckets]]; pass --buckets name:dim:lo:hi,...", file=sys.stderr)
        return 2
    if DRY_RUN:
        shapes = [s for _, s in d.probe_shapes(task)]
    else:
        shapes = task.shapes + sweep_shapes(task, args.sweep)
    gpu = "cpu (dry run)" if DRY_RUN else torch.cuda.get_device_name(0)
    print(f"{task.name} on {gpu}; buckets: "
          + ", ".join(f"{b.name}=[{b.lo},{b.hi if b.hi < 2**61 else 'inf'})" for b in task.buckets))
    with tempfile.TemporaryDirectory(prefix="warpsmith-dispatch-") as tmp:
        if args.check:
            path = args.check
        else:
            if not args.kernel:
                print("give --kernel FILE (one or more) or --check FILE", file=sys.stderr)
                return 2
            session = build_session(task, args.kernel, shapes, Path(tmp), args.against)
            if not d.bucket_keeps(session):
                print(f"no kernel beats the {args.against} on every shape of any bucket: nothing to dispatch")
                return 0
            path = args.out or Path(tmp) / f"dispatch_{task.name}.py"
            if d.export_session(session, path, task) != 0:
                return 1
        rows = measure_dispatcher(task, path, shapes)
        print_rows(rows)
        summary = bucket_summary(rows)
        print_buckets(summary)
        bad = [r["shape"] for r in rows if not r["correct"] or not r["graph_ok"]]
        def over(r, label):
            ref_us = r["kernels"][label]["graph_us"]
            return bool(r["dispatch_us"] and ref_us and r["dispatch_us"] > 1.05 * ref_us + 1.0)

        overhead = [r["shape"] for r in rows if over(r, r["routed"])]
        vs_default = [r["shape"] for r in rows if r["routed"] != "default" and over(r, "default")]
        vs_best = [r["shape"] for r in rows if r["best_single"] and over(r, r["best_single"])]
        print(f"dispatcher: correct and capturable on {len(rows) - len(bad)}/{len(rows)} shapes; "
              f"slower (>5% + 1 us) than the kernel it routes to on {overhead or 'none'}; than the default "
              f"where it routes to a kept kernel on {vs_default or 'none'}; than the fastest single "
              f"implementation on {vs_best or 'none'}")
        if args.json:
            args.json.write_text(json.dumps({"task": task.name, "gpu": gpu, "dry_run": DRY_RUN,
                                             "dispatcher": Path(path).read_text(), "rows": rows,
                                             "buckets": summary}, indent=2, default=str))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())

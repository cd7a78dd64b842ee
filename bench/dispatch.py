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
dispatcher; then measure it (harness/model/dispatch_measure.py does the measuring and the session). Measurement (second
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
from harness.model.dispatch_measure import build_session, measure_dispatcher  # noqa: E402
from harness.authoring.tasks import Bucket, Shape, Task, load_task  # noqa: E402


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


DEVICE = "cuda"  # "cpu" with --dry-run: the plumbing on a CPU (Triton interpreter, wall clock); never kernel speeds


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
    global DEVICE
    if args.dry_run:
        import os

        os.environ.setdefault("TRITON_INTERPRET", "1")
        DEVICE = "cpu"
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
    dry_run = DEVICE == "cpu"
    if dry_run:
        shapes = [s for _, s in d.probe_shapes(task)]
    else:
        shapes = task.shapes + sweep_shapes(task, args.sweep)
    gpu = "cpu (dry run)" if dry_run else torch.cuda.get_device_name(0)
    print(f"{task.name} on {gpu}; buckets: "
          + ", ".join(f"{b.name}=[{b.lo},{b.hi if b.hi < 2**61 else 'inf'})" for b in task.buckets))
    with tempfile.TemporaryDirectory(prefix="warpsmith-dispatch-") as tmp:
        if args.check:
            path = args.check
        else:
            if not args.kernel:
                print("give --kernel FILE (one or more) or --check FILE", file=sys.stderr)
                return 2
            session = build_session(task, args.kernel, shapes, Path(tmp), args.against, DEVICE)
            if not d.bucket_keeps(session):
                print(f"no kernel beats the {args.against} on every shape of any bucket: nothing to dispatch")
                return 0
            path = args.out or Path(tmp) / f"dispatch_{task.name}.py"
            if d.export_session(session, path, task) != 0:
                return 1
        rows = measure_dispatcher(task, path, shapes, DEVICE)
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
            args.json.write_text(json.dumps({"task": task.name, "gpu": gpu, "dry_run": dry_run,
                                             "dispatcher": Path(path).read_text(), "rows": rows,
                                             "buckets": summary}, indent=2, default=str))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())

"""`warpsmith eval TASK CANDIDATE.py`: one candidate through every stage; exit 0 iff accepted."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval", help="check, run and time one candidate file against a task",
                              description="Static checks, correctness on every shape, runtime guards and (on a "
                                          "GPU) timing against the incumbent. Exit 0 if accepted, 1 if "
                                          "rejected, 2 for bad usage or input.")
    p.add_argument("task", help="task name (kernels/<name>) or path to a task folder")
    p.add_argument("candidate", type=Path, help="Python file defining the task's entry function")
    p.add_argument("--incumbent", type=Path, default=None, help="file to time against (default: the task's kernel.py)")
    p.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    p.add_argument("--shapes", default=None, help="comma-separated shape names (default: all for this device)")
    p.add_argument("--seed", type=int, default=None, help="fix the input seed (default: a secret random one)")
    p.add_argument("--no-static", action="store_true", help="skip the static stage")
    p.add_argument("--no-time", action="store_true", help="skip timing even on a GPU")
    p.add_argument("--cpu", action="store_true", help="run in Triton's interpreter even if a GPU is present")
    p.add_argument("--samples", type=int, default=40, help="timed samples per side per shape (default 40)")
    p.set_defaults(func=run)


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def print_table(v: dict, out=sys.stdout) -> None:
    status = "ACCEPTED" if v["accepted"] else f"REJECTED at {v['stage']}"
    print(f"{v['task']}: {status}  ({v['device']}, {v['wall_s']:.1f} s)", file=out)
    rows = [("shape", "ok", "cand µs", "inc µs", "speedup", "±%", "roofline%", "graph µs")]
    for s in v["shapes"]:
        rows.append((s["name"], "yes" if s["correct"] else "NO", _fmt(s["candidate_us"], ".1f"),
                     _fmt(s["incumbent_us"], ".1f"), _fmt(s["speedup"], ".3f"), _fmt(s["noise_pct"], ".1f"),
                     _fmt(s["roofline_pct"], ".0f"), _fmt(s["candidate_graph_us"], ".1f")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))),
              file=out)
    if v["geomean_speedup"] is not None:
        print(f"  geomean speedup {v['geomean_speedup']:.3f}x (noise band ±{v['noise_band_pct']:.1f}%)", file=out)
    elif not v["timing_available"]:
        print("  timing unavailable (no GPU): correctness and guards only", file=out)
    for r in v["reasons"]:
        first, *rest = r["message"].splitlines() or [""]
        print(f"  ✗ {r['rule']}: {first}", file=out)
    for n in v.get("notes", []):
        print(f"  note: {n}", file=out)
    rec = v["recommendation"]
    print(f"  recommendation: {rec['action']} — {rec['reason']}", file=out)


def run(args: argparse.Namespace) -> int:
    from harness.evaluate import EvalOptions, evaluate
    from harness.tasks import TaskError, load_task

    try:
        task = load_task(args.task)
    except TaskError as e:
        print(f"warpsmith eval: {e}", file=sys.stderr)
        return 2
    if not args.candidate.is_file():
        print(f"warpsmith eval: {args.candidate}: no such file (give the candidate's .py path)", file=sys.stderr)
        return 2
    if args.incumbent is not None and not args.incumbent.is_file():
        print(f"warpsmith eval: {args.incumbent}: no such file (--incumbent)", file=sys.stderr)
        return 2
    opts = EvalOptions(static=not args.no_static, time=not args.no_time, seed=args.seed, samples=args.samples,
                       shapes=[s.strip() for s in args.shapes.split(",") if s.strip()] if args.shapes else None,
                       on_gpu=False if args.cpu else None)
    try:
        v = evaluate(task, args.candidate, args.incumbent, opts)
    except TaskError as e:
        print(f"warpsmith eval: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(v, indent=1))
    else:
        print_table(v)
    return 0 if v["accepted"] else 1

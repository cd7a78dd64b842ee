"""Where one evaluation's seconds go, step by step, even when it never ends (issue 35).

    python bench/eval_trace.py TASK [CANDIDATE] [--limit S] [--shapes "a,b"] [--samples N] [--fill-profile]

Runs `warpsmith eval TASK CANDIDATE` (default: the task's baseline against itself) in this process with
$WARPSMITH_TRACE set (harness/evaluate/trace.py), and prints, at the end or when --limit seconds have
passed (then the evaluation is abandoned), the seconds by phase, step and child op, the slowest steps
and how far it got. --fill-profile first profiles one refill of a timed batch's input set (the task's
fill_inputs on its largest shape) with torch.profiler: the ops and the host time of each.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.evaluate import trace  # noqa: E402


def table(lines: list[dict], wall: float, done: bool, out=sys.stdout) -> None:
    rows = trace.summarise(lines)
    print(f"\n== {'finished' if done else 'CUT at the limit'} after {wall:.1f} s; {len(lines)} traced steps", file=out)
    print(f"{'phase':<12} {'step':<8} {'op':<8} {'n':>6} {'parent s':>9} {'child s':>9}", file=out)
    for p, k, o, n, s, cs in rows[:25]:
        print(f"{p:<12} {k:<8} {o:<8} {n:>6} {s:>9.2f} {cs:>9.2f}", file=out)
    preps = [ln for ln in lines if ln.get("op") == "prep" and ln.get("parts")]
    if preps:
        parts: dict[str, float] = {}
        for ln in preps:
            for k, v in ln["parts"].items():
                parts[k] = parts.get(k, 0.0) + float(v)
        print("prep parts (child s, summed): " + ", ".join(f"{k} {v:.2f}" for k, v in sorted(parts.items())), file=out)
    by_dims: dict[str, list[float]] = {}
    for ln in lines:
        if ln.get("dims") is not None:
            d = by_dims.setdefault(json.dumps(ln["dims"], sort_keys=True), [0, 0.0])
            d[0] += 1
            d[1] += float(ln.get("s") or 0)
    if by_dims:
        print("requests by dims (the costliest 8):", file=out)
        for k, (n, s) in sorted(by_dims.items(), key=lambda kv: -kv[1][1])[:8]:
            print(f"  {s:8.2f} s {int(n):5d} req  {k}", file=out)
    print("last step: " + (json.dumps(lines[-1])[:300] if lines else "none"), file=out)


def fill_profile(task_name: str) -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile

    from harness.authoring.tasks import load_task

    task = load_task(task_name)
    ref = task.load_reference()
    shape = max(task.shapes, key=lambda s: sum(v for v in s.dims.values() if isinstance(v, int)))
    dt = getattr(torch, task.dtypes[0])
    xs = list(ref.make_inputs(shape.dims, dt, 1, "cuda"))
    fill = getattr(ref, "fill_inputs", None)
    for s in (2, 3):  # warm
        fill(xs, shape.dims, s) if fill else ref.make_inputs(shape.dims, dt, s, "cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(4, 14):
        fill(xs, shape.dims, s) if fill else ref.make_inputs(shape.dims, dt, s, "cuda")
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / 10 * 1e3
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fill(xs, shape.dims, 99) if fill else ref.make_inputs(shape.dims, dt, 99, "cuda")
        torch.cuda.synchronize()
    print(f"== {task_name} {shape.name}: one {'fill_inputs' if fill else 'make_inputs'} {per:.2f} ms (mean of 10)")
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=14, max_name_column_width=40))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("candidate", nargs="?")
    ap.add_argument("--limit", type=float, default=300.0, help="seconds before the evaluation is abandoned")
    ap.add_argument("--shapes", default=None, help="shape names, comma-separated (default: all)")
    ap.add_argument("--samples", type=int, default=None)
    ap.add_argument("--fill-profile", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="the verdict, when it finishes")
    a = ap.parse_args(argv)
    if a.fill_profile:
        fill_profile(a.task)
    path = tempfile.mktemp(prefix="warpsmith-trace-", suffix=".jsonl")
    os.environ[trace.ENV] = path
    from harness.evaluate import EvalOptions, evaluate, prewarm
    from harness.authoring.tasks import load_task

    task = load_task(a.task)
    opts = EvalOptions(shapes=[s.strip() for s in a.shapes.split(",")] if a.shapes else None)
    if a.samples:
        opts.samples = a.samples
    prewarm.for_one_evaluation(None, opts)
    t0 = time.monotonic()

    def cut() -> None:
        table(trace.read(path), time.monotonic() - t0, False)
        sys.stdout.flush()
        os._exit(124)  # the children die with their sandboxes (--die-with-parent)

    timer = threading.Timer(a.limit, cut)
    timer.daemon = True
    timer.start()
    v = evaluate(task, Path(a.candidate or task.baseline_path), options=opts)
    timer.cancel()
    table(trace.read(path), time.monotonic() - t0, True)
    print(f"verdict: accepted={v['accepted']} stage={v['stage']} wall={v['wall_s']} s phases={v.get('phases_s')}")
    for r in v["reasons"][:5]:
        print(f"  {r['rule']}: {r['message'][:200]}")
    if a.json:
        a.json.write_text(json.dumps(v, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

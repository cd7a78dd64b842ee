"""Per-bucket dispatch measured: each kernel against what users run otherwise, shape by shape; a real
session whose candidates carry those measurements as their verdicts, each kept for the buckets it wins;
then the exported dispatcher against every implementation of its table (bench/dispatch.py is the
command line; the GPU test of tests/model/test_dispatch.py runs it here).

A time is a CUDA-graph replay (triton.testing.do_bench_cudagraph) beside the eager one (do_bench, L2
flushed), medians. On a CPU (device "cpu", the Triton interpreter) both are the wall clock of a call:
the plumbing checked, never kernel speeds. `timer` replaces the clock (tests give canned times).
"""
from __future__ import annotations

import importlib
import math
import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

from harness import events as ev
from harness.model.dispatch import _default_spec, bucket_results, keep_for_buckets
from harness.evaluate.records import Recommendation, ShapeResult, Verdict
from harness.profiling.measure import capture_graph
from harness.sessions.session import Session
from harness.authoring.tasks import Shape, Task, compare, load_module

# (fn, inputs, device) -> (eager µs, graph µs, error): None for a time not measured, error None when it ran
Timer = Callable[[Callable, tuple, str], "tuple[float | None, float | None, str | None]"]


def _wall_us(fn: Callable, inputs: tuple, reps: int = 3) -> float:
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*inputs)
        out.append((time.perf_counter() - t0) * 1e6)
    return statistics.median(out)


def time_call(fn: Callable, inputs: tuple, device: str = "cuda") -> tuple[float | None, float | None, str | None]:
    """(eager µs, graph µs, error): medians, L2 flushed between reps by do_bench; on a CPU the wall clock
    of a call for both. A kernel that can't run a shape loses it, with the reason."""
    if device == "cpu":
        try:
            us = _wall_us(fn, inputs)
        except Exception as e:  # the reason is the result: shown per shape
            return None, None, f"{type(e).__name__}: {str(e)[:160]}"
        return us, us, None
    import triton.testing  # (GPU only: a CPU run never needs it)

    try:
        fn(*inputs)
        torch.cuda.synchronize()
        eager = triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=100, return_mode="median") * 1e3
    except Exception as e:  # the reason is the result: shown per shape
        return None, None, f"{type(e).__name__}: {str(e)[:160]}"
    try:
        graph = triton.testing.do_bench_cudagraph(lambda: fn(*inputs), rep=100, return_mode="median") * 1e3
    except Exception as e:  # eager ran: the graph's failure is named beside it
        return eager, None, f"graph: {type(e).__name__}: {str(e)[:160]}"
    return eager, graph, None


def graph_replay_matches(fn: Callable, inputs: tuple, device: str = "cuda") -> bool:
    """A CUDA graph of `fn` replays to what it returns eagerly (on a CPU: two eager calls agree)."""
    if device == "cpu":
        return bool(torch.equal(fn(*inputs), fn(*inputs)))
    out = fn(*inputs)
    torch.cuda.synchronize()
    g, captured = capture_graph(lambda: fn(*inputs), warmup=1)
    g.replay()
    torch.cuda.synchronize()
    return bool(torch.equal(captured, out))


def default_fn(task: Task) -> Callable:
    """The task's default implementation (what the dispatcher falls back to)."""
    mod, fn, src = _default_spec(task)
    if src is not None:
        return getattr(load_module(task.root / (mod.replace(".", "/") + ".py"), "warpsmith_bench_default"), fn)
    return getattr(importlib.import_module(mod), fn)


def measured_verdict(shapes: list[ShapeResult]) -> Verdict:
    """A kernel's verdict from its measurements alone: accepted when correct on every shape; never a
    plain keep (a bucket keep or nothing), but keepable for the buckets it wins."""
    sp = [s.speedup for s in shapes if s.speedup]
    return Verdict(accepted=all(s.correct for s in shapes), stage="done", shapes=shapes, timing_available=True,
                   geomean_speedup=math.exp(sum(map(math.log, sp)) / len(sp)) if sp else None,
                   recommendation=Recommendation("revert", "bench: per-bucket keeps only", True))


def build_session(task: Task, kernels: list[Path], shapes: list[Shape], base: Path, against: str = "default",
                  device: str = "cuda", timer: Timer = time_call, say: Callable[[str], None] = print) -> Session:
    """A real session whose verdicts are this machine's measurements, candidates kept per winning bucket.

    Each kernel is timed against `against` (the task's default: a bucket routes to a kernel only where
    it beats what users run otherwise; or the baseline kernel.py). Where two kernels win one bucket,
    the faster (bucket geomean) keeps it. Journalled as the loop journals: the proposal, its verdict,
    the decision (revert: nothing is kept globally), then the bucket keep."""
    ref = task.load_reference()
    dtype = getattr(torch, task.dtypes[0])
    baseline = (default_fn(task) if against == "default"
                else getattr(load_module(task.baseline_path, "warpsmith_bench_baseline"), task.entry))
    session = Session.create(task.name, "bench", task.baseline_path.read_text(), base=base)
    ws = session.workspace
    holder_us: dict[str, float] = {}
    for it, kpath in enumerate(kernels, 1):
        fn = getattr(load_module(kpath, f"warpsmith_bench_k{it}"), task.entry)
        measured = []
        for shape in shapes:
            inputs = ref.make_inputs(shape.dims, dtype, 0, device)
            expected = ref.reference(*inputs)
            _, c_graph, c_err = timer(fn, inputs, device)
            _, i_graph, _ = timer(baseline, inputs, device)
            ok = c_err is None and compare(task, ref, fn(*inputs), expected, inputs, task.dtypes[0]) is None
            measured.append(ShapeResult(name=shape.name, dims=shape.dims, long=shape.long, correct=ok, error=c_err,
                                        candidate_us=c_graph, incumbent_us=i_graph,
                                        speedup=(i_graph / c_graph) if ok and c_graph and i_graph else None))
            say(f"  {kpath.name} {shape.name:<22} candidate {c_graph or float('nan'):8.1f} us  {against} "
                f"{i_graph or float('nan'):8.1f} us  {'ok' if ok else 'FAIL ' + str(c_err)}")
            del inputs, expected
            if device != "cpu":
                torch.cuda.empty_cache()
        verdict = measured_verdict(measured)
        commit = ws.commit_candidate(kpath.read_text(), it, kpath.stem)
        session.record(ev.CandidateProposed(it, commit, kpath.stem, "", "", "bench").to_dict())
        session.record(ev.EvalResult(it, verdict).to_dict())
        results = {r.bucket: r for r in bucket_results(task, verdict, margin=0.02)}
        wins = [b for b, r in results.items() if r.wins and r.candidate_us
                and r.candidate_us < holder_us.get(b, float("inf"))]
        holder_us.update({b: results[b].candidate_us for b in wins})
        session.record(ev.Decision(it, "revert", "auto", False, "kept for buckets only" if wins else "",
                                   commit, ws.best).to_dict())
        if wins:
            keep_for_buckets(session, it, commit, wins, task, verdict, by="auto", reason="--keep-buckets auto")
        say(f"  {kpath.name}: wins {wins or 'no bucket'}")
    return session


def measure_dispatcher(task: Task, path: Path, shapes: list[Shape] | None = None, device: str = "cuda",
                       timer: Timer = time_call) -> list[dict[str, Any]]:
    """Per shape: the dispatcher against the default and every kernel of its table. One dict a shape:
    {shape, dims, bucket, routed, kernels: {label: {eager_us, graph_us, correct, error}}, best_single,
    best_single_us, dispatch_us, default_us, graph_ok, correct}."""
    mod = load_module(Path(path), "warpsmith_bench_dispatcher")
    ref = task.load_reference()
    dtype = getattr(torch, task.dtypes[0])
    impls = mod.kernels()  # {label: fn}, the default included
    rows = []
    for shape in shapes or task.shapes:
        inputs = ref.make_inputs(shape.dims, dtype, 0, device)
        expected = ref.reference(*inputs)
        bucket, routed = mod.route(*inputs)
        row: dict[str, Any] = {"shape": shape.name, "dims": shape.dims, "bucket": bucket, "routed": routed,
                               "kernels": {}}
        for label, fn in list(impls.items()) + [("dispatcher", getattr(mod, task.entry))]:
            eager, graph, err = timer(fn, inputs, device)
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
            row["graph_ok"] = graph_replay_matches(getattr(mod, task.entry), inputs, device)
        except Exception as e:  # a dispatcher that can't be captured fails the row, saying why
            row["graph_ok"], row["graph_error"] = False, f"{type(e).__name__}: {e}"
        row["correct"] = bool(disp["correct"])
        rows.append(row)
        del inputs, expected
        if device != "cpu":
            torch.cuda.empty_cache()
    return rows

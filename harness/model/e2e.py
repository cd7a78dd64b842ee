"""End-to-end checks: does a kernel that wins alone make the workload around it faster?

A task names `e2e = "e2e.py"` in its task.toml. That module defines
    TASKS = ("rmsnorm", "softmax")           # tasks whose kernels plug in (optional: the task alone)
    build(kernels: dict[str, fn], device) -> workload
where `workload.run()` does one step of a small real workload (several ops around the kernel) on
buffers it owns and returns its output; tasks absent from `kernels` use the workload's own default.
Optional: `TOLERANCE = (atol, rtol)` for comparing outputs (default: the task's, doubled), and
keyword options to build() (sizes) that `bench/e2e.py --option k=v` passes through.

Timing on a GPU: each workload is captured once in a CUDA graph and its replays timed with CUDA
events; workloads are interleaved round by round so drift hits all alike. A candidate whose workload
cannot be captured while the incumbent's can, or whose workload is slower beyond the noise band, is
rejected (`e2e-graph`, `e2e-slower`). Without a GPU, timing is unavailable and nothing is rejected
for speed; the outputs are still compared. Tests inject a timer (`Timer`) to exercise the logic.
torch is imported inside the functions that run a workload: it takes seconds, and the harness
imports this module to build a loop whether or not any task has an e2e workload.
"""
from __future__ import annotations

import contextlib
import io
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from harness.model.dispatch import bucket_keeps, export_session
from harness.evaluate.process import scrubbed_env
from harness.evaluate.sandbox import confine
from harness.authoring.tasks import Task, TaskError, load_module, load_task

Timer = Callable[[Callable[[], Any], int], list[float]]  # (step, reps) -> per-rep microseconds
MIN_NOISE_BAND = 0.02  # never call a <2% e2e difference a loss: CUDA-graph replays still jitter this much
# A spread wider than this (a loaded CPU: a few calls 5x the rest) would excuse any loss, even 10x;
# the every-round rule (slower_every_round) then carries the judgement.
MAX_NOISE_BAND = 0.5


class E2EError(Exception):
    """A workload that can't be built or run; str() names the file and what to do."""


class GraphCaptureError(E2EError):
    pass


def _import_file(path: Path, name: str) -> ModuleType:
    return load_module(path, name)  # (registers the module in sys.modules while it runs)


def load_workload_module(task: Task) -> ModuleType:
    if not task.e2e:
        raise E2EError(f"{task.toml_path}: no `e2e = \"e2e.py\"` line: the task has no end-to-end workload")
    path = task.root / task.e2e
    if not path.is_file():
        raise E2EError(f"{task.toml_path}: e2e: {path} does not exist")
    try:
        mod = _import_file(path, f"warpsmith_e2e_{task.name}")
    except Exception as e:
        raise E2EError(f"{path}: import failed: {type(e).__name__}: {e}") from None
    if not callable(getattr(mod, "build", None)):
        raise E2EError(f"{path}: must define build(kernels, device) -> workload with .run()")
    return mod


def workload_tasks(mod: ModuleType, task_name: str) -> tuple[str, ...]:
    return tuple(getattr(mod, "TASKS", (task_name,)))


def load_kernel(task: Task, path: Path, tag: str) -> Callable:
    try:
        mod = load_module(Path(path), f"warpsmith_e2e_kernel_{task.name}_{tag}")
    except Exception as e:
        raise E2EError(f"{path}: import failed: {type(e).__name__}: {e}") from None
    fn = getattr(mod, task.entry, None)
    if not callable(fn):
        raise E2EError(f"{path}: defines no {task.entry}() (task {task.name}'s entry)")
    return fn


# -- timers -------------------------------------------------------------------------------------

def wall_timer(step: Callable[[], Any], reps: int) -> list[float]:
    """CPU wall clock per call (tests and CPU workloads; never reported as a GPU time)."""
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        step()
        out.append((time.perf_counter() - t0) * 1e6)
    return out


class CudaGraphTimer:
    """Captures each step once in a CUDA graph, then times replays with CUDA events.

    Capture happens after warm-up on a side stream (Triton compiles and autotunes outside capture);
    a step that can't be captured raises GraphCaptureError: in a served model it would run eagerly.
    """

    def __init__(self, warmup: int = 3):
        self.warmup = warmup
        self.graphs: dict[Any, Any] = {}

    def _graph(self, step: Callable[[], Any]):
        from harness.profiling.measure import capture_graph  # (light; torch inside it, only when a workload runs)

        key = step  # bound methods compare by (instance identity, function): one graph per workload
        if key not in self.graphs:
            try:  # (its warm-up steps on a side stream, then the capture: a failure in either is this error)
                g, _ = capture_graph(step, warmup=self.warmup)
            except Exception as e:
                raise GraphCaptureError(f"CUDA-graph capture failed: {type(e).__name__}: {str(e)[:200]}") from None
            self.graphs[key] = g
        return self.graphs[key]

    def __call__(self, step: Callable[[], Any], reps: int) -> list[float]:
        import torch  # ~1 s: only when a workload runs

        g = self._graph(step)
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        g.replay()
        for a, b in zip(starts, ends):
            a.record()
            g.replay()
            b.record()
        torch.cuda.synchronize()
        return [a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends)]


def time_interleaved(steps: dict[str, Callable[[], Any]], timer: Timer, reps: int, rounds: int) -> dict[str, list[float]]:
    """Samples per label, alternating labels each round (and reversing the order every other round)."""
    samples: dict[str, list[float]] = {k: [] for k in steps}
    order = list(steps)
    for r in range(rounds):
        for label in (order if r % 2 == 0 else order[::-1]):
            samples[label] += timer(steps[label], reps)
    return samples


def slower_every_round(incumbent: list[float], candidate: list[float], reps: int) -> bool:
    """Whether the candidate's median is the slower one in every round of `time_interleaved`.

    A round's two sides run back to back, under the same load; a burst that falls on the candidate's
    calls in some rounds shifts the pooled median past a band taken from the spread, and must not
    pass for a slower candidate (same kernel rejected in CI, 37c6676)."""
    n = min(len(incumbent), len(candidate)) // reps
    return n > 0 and all(statistics.median(candidate[r * reps:(r + 1) * reps]) >
                         statistics.median(incumbent[r * reps:(r + 1) * reps]) for r in range(n))


def noise_band(samples: list[float]) -> float:
    """Relative half-spread (IQR / 2 / median) of one workload's samples, within [MIN_NOISE_BAND,
    MAX_NOISE_BAND]."""
    if len(samples) < 4:
        return MIN_NOISE_BAND
    q = statistics.quantiles(samples, n=4)
    med = statistics.median(samples)
    return min(MAX_NOISE_BAND, max(MIN_NOISE_BAND, (q[2] - q[0]) / 2 / med if med > 0 else 1.0))


# -- comparing outputs --------------------------------------------------------------------------

def outputs_match(a: Any, b: Any, atol: float, rtol: float) -> str | None:
    import torch  # ~1 s: only when a workload runs

    xs = a if isinstance(a, (tuple, list)) else (a,)
    ys = b if isinstance(b, (tuple, list)) else (b,)
    if len(xs) != len(ys):
        return f"workload returned {len(xs)} outputs, expected {len(ys)}"
    for i, (x, y) in enumerate(zip(xs, ys)):
        if x.shape != y.shape:
            return f"output {i} shape {tuple(x.shape)} != {tuple(y.shape)}"
        xf, yf = x.detach().float().cpu(), y.detach().float().cpu()
        if not torch.isfinite(xf).all():
            return f"output {i} has NaN/Inf"
        bad = (xf - yf).abs() > atol + rtol * yf.abs()
        if bad.any():
            return (f"output {i}: {int(bad.sum())} of {bad.numel()} elements differ beyond atol {atol} rtol {rtol} "
                    f"(max abs diff {float((xf - yf).abs().max()):.4g})")
    return None


def _tolerance(task: Task, mod: ModuleType) -> tuple[float, float]:
    tol = getattr(mod, "TOLERANCE", None)
    if tol is not None:
        return float(tol[0]), float(tol[1])
    t = task.tolerance[task.dtypes[0]]
    return 2 * t.atol, 2 * t.rtol


def _default_device() -> str:
    try:
        import torch  # ~1 s: only when a workload runs

        return "cuda" if torch.cuda.is_available() else "cpu"
    except Exception:
        return "cpu"


# -- the check on one candidate ------------------------------------------------------------------

def e2e_check(task: Task, candidate: Path | Callable, incumbent: Path | Callable, *, device: str | None = None,
              timer: Timer | None = None, reps: int = 20, rounds: int = 6,
              kernel_speedup: float | None = None) -> dict:
    """Time the task's workload with the incumbent and with the candidate plugged in.

    Returns {available, timing_available, correct, candidate_us, incumbent_us, speedup, noise_band,
    accepted, reason: {rule, message} | None, workload}. `kernel_speedup` (the kernel's own geomean)
    only sharpens the message of a rejection."""
    if not task.e2e:
        return {"available": False, "timing_available": False, "accepted": True, "reason": None,
                "message": "task declares no e2e workload"}
    device = device or _default_device()
    mod = load_workload_module(task)
    if task.name not in workload_tasks(mod, task.name):
        raise E2EError(f"{task.root / task.e2e}: TASKS = {workload_tasks(mod, task.name)} does not include "
                       f"{task.name!r}: the workload would never call the candidate")
    cand_fn = candidate if callable(candidate) else load_kernel(task, Path(candidate), "candidate")
    inc_fn = incumbent if callable(incumbent) else load_kernel(task, Path(incumbent), "incumbent")
    try:
        w_inc = mod.build({task.name: inc_fn}, device)
        w_cand = mod.build({task.name: cand_fn}, device)
    except Exception as e:
        raise E2EError(f"{task.root / task.e2e}: build() failed: {type(e).__name__}: {e}") from None
    res: dict[str, Any] = {"available": True, "workload": getattr(w_inc, "description", task.e2e), "device": device,
                           "accepted": True, "reason": None, "candidate_us": None, "incumbent_us": None,
                           "speedup": None, "noise_band": None}
    atol, rtol = _tolerance(task, mod)
    try:
        out_c = w_cand.run()
    except Exception as e:
        res.update(correct=False, timing_available=False, accepted=False,
                   reason={"rule": "e2e-crash", "message": f"workload with the candidate raised {type(e).__name__}: {e}"})
        return res
    err = outputs_match(out_c, w_inc.run(), atol, rtol)
    res["correct"] = err is None
    if err:
        res.update(accepted=False, timing_available=False,
                   reason={"rule": "e2e-incorrect", "message": f"workload output differs with the candidate: {err}"})
        return res
    if timer is None and not device.startswith("cuda"):
        res["timing_available"] = False
        return res
    timer = timer or CudaGraphTimer()
    res["timing_available"] = True
    steps = {"incumbent": w_inc.run, "candidate": w_cand.run}
    try:
        timer(w_inc.run, 1)
    except GraphCaptureError as e:
        res.update(timing_available=False, message=f"incumbent's workload not capturable: {e}")
        return res
    try:
        samples = time_interleaved(steps, timer, reps, rounds)
    except GraphCaptureError as e:
        res.update(accepted=False, reason={"rule": "e2e-graph", "message": f"the candidate breaks CUDA-graph capture "
                                                                           f"of the workload: {e}"})
        return res
    inc_us, cand_us = statistics.median(samples["incumbent"]), statistics.median(samples["candidate"])
    band = max(noise_band(samples["incumbent"]), noise_band(samples["candidate"]))
    speedup = inc_us / cand_us
    res.update(candidate_us=cand_us, incumbent_us=inc_us, speedup=speedup, noise_band=band)
    if speedup < 1.0 - band and slower_every_round(samples["incumbent"], samples["candidate"], reps):
        alone = f"wins alone ({kernel_speedup:.3f}x) but " if kernel_speedup and kernel_speedup > 1 else ""
        res.update(accepted=False, reason={"rule": "e2e-slower", "message": (
            f"{alone}loses end to end: {res['workload']} takes {cand_us:.1f} us with it vs {inc_us:.1f} us "
            f"({speedup:.3f}x, noise band {band:.1%})")})
    return res


def run_e2e_check(task: Task, candidate: Path, incumbent: Path, timeout_s: float = 600.0,
                  kernel_speedup: float | None = None) -> dict:
    """e2e_check in a child process: candidate code never runs in the harness's own process, and
    the child's environment is scrubbed of credentials as the evaluator's is. Same dict as e2e_check;
    a crash or timeout comes back as a rejection (`e2e-crash`)."""
    on_gpu = _default_device().startswith("cuda")
    cmd = [sys.executable, "-m", "harness.model.e2e", str(task.root), str(Path(candidate).resolve()),
           str(Path(incumbent).resolve()), json.dumps(kernel_speedup)]
    cwd = str(Path(__file__).resolve().parents[2])
    argv, env, cleanup = confine(cmd, scrubbed_env(on_gpu=on_gpu), on_gpu, [task.root, candidate, incumbent], cwd)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"available": True, "accepted": False, "timing_available": False,
                "reason": {"rule": "e2e-crash", "message": f"e2e workload timed out after {timeout_s:.0f}s"}}
    finally:
        cleanup()
    last = (r.stdout.strip().splitlines() or [""])[-1]
    try:
        return json.loads(last)
    except json.JSONDecodeError:
        tail = (r.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return {"available": True, "accepted": False, "timing_available": False,
                "reason": {"rule": "e2e-crash", "message": f"e2e child exited {r.returncode}: {tail}"}}


def _child_main(argv: list[str]) -> int:
    """`python -m harness.model.e2e TASK_DIR CANDIDATE INCUMBENT KERNEL_SPEEDUP_JSON`: one JSON line out."""
    task_dir, cand, inc, ks = argv
    task = load_task(task_dir, check_null=False)
    if not task.e2e and (task.root / "e2e.py").is_file():
        task.e2e = "e2e.py"
    try:
        res = e2e_check(task, Path(cand), Path(inc), kernel_speedup=json.loads(ks))
    except E2EError as e:
        res = {"available": True, "accepted": False, "timing_available": False,
               "reason": {"rule": "e2e-crash", "message": str(e)}}
    print(json.dumps(res, default=str))
    return 0


def apply_e2e(verdict: dict, e2e: dict) -> dict:
    """Fold an e2e result into an evaluator verdict: a rejection turns the recommendation to revert,
    makes the candidate unkeepable and names the rule (so the report's breakdown shows it)."""
    verdict = dict(verdict)
    verdict["e2e"] = e2e
    if e2e.get("accepted", True):
        return verdict
    reason = e2e["reason"]
    verdict["accepted"] = False
    verdict["stage"] = "e2e"
    verdict["reasons"] = list(verdict.get("reasons", [])) + [reason]
    verdict["recommendation"] = {"action": "revert", "reason": reason["message"], "can_keep": False}
    return verdict


# -- stacking several sessions' kernels ----------------------------------------------------------

def stack(workload_task: Task, kernels: dict[str, Callable], *, device: str | None = None,
          timer: Timer | None = None, reps: int = 20, rounds: int = 6, options: dict | None = None) -> dict:
    """Time the workload with every kernel plugged in, each alone, and none (defaults).

    Returns {workload, device, timing_available, rows: [{label, tasks, us, speedup, correct, error}]},
    speedups against the all-defaults workload."""
    device = device or _default_device()
    mod = load_workload_module(workload_task)
    allowed = workload_tasks(mod, workload_task.name)
    unknown = [t for t in kernels if t not in allowed]
    if unknown:
        raise E2EError(f"{workload_task.root / workload_task.e2e}: TASKS = {allowed} does not take {unknown}; "
                       f"pick a workload that uses them (--workload TASK)")
    configs: dict[str, dict[str, Callable]] = {"defaults": {}}
    for t, fn in kernels.items():
        configs[f"only {t}"] = {t: fn}
    if len(kernels) > 1:
        configs["all stacked"] = dict(kernels)
    try:
        built = {label: mod.build(ks, device, **(options or {})) for label, ks in configs.items()}
    except Exception as e:
        raise E2EError(f"{workload_task.root / workload_task.e2e}: build() failed: {type(e).__name__}: {e}") from None
    atol, rtol = _tolerance(workload_task, mod)
    # Each configuration's FIRST run is compared: a workload may carry state from run to run (the
    # DeepSeek V4 decode step advances its positions and caches), so a second run of the defaults
    # is a different step, not the reference.
    firsts: dict[str, Any] = {}
    for label, w in built.items():
        try:
            firsts[label] = w.run()
        except Exception as e:
            firsts[label] = e
    reference = firsts["defaults"]
    rows = []
    for label in built:
        got = firsts[label]
        try:
            if isinstance(reference, Exception):
                raise reference
            err = f"{type(got).__name__}: {got}" if isinstance(got, Exception) else outputs_match(got, reference, atol, rtol)
        except Exception as e:
            err = f"{type(e).__name__}: {e}"
        rows.append({"label": label, "tasks": sorted(configs[label]), "us": None, "speedup": None,
                     "correct": err is None, "error": err})
    out = {"workload": getattr(built["defaults"], "description", workload_task.e2e), "device": device,
           "timing_available": False, "rows": rows}
    if timer is None and not device.startswith("cuda"):
        return out
    timer = timer or CudaGraphTimer()
    ok = {r["label"]: built[r["label"]].run for r in rows if r["correct"]}
    try:
        samples = time_interleaved(ok, timer, reps, rounds)
    except GraphCaptureError as e:
        out["error"] = str(e)
        return out
    base = statistics.median(samples["defaults"])
    for r in rows:
        if r["label"] in samples:
            r["us"] = statistics.median(samples[r["label"]])
            r["speedup"] = base / r["us"]
            r["noise_band"] = noise_band(samples[r["label"]])
    out["timing_available"] = True
    return out


def format_stack(result: dict) -> list[str]:
    lines = [f"workload: {result['workload']} on {result['device']}",
             f"  {'configuration':<28} {'us':>10} {'speedup':>8}  correct"]
    for r in result["rows"]:
        us = f"{r['us']:.1f}" if r["us"] is not None else "n/a"
        sp = f"{r['speedup']:.3f}x" if r["speedup"] is not None else "n/a"
        lines.append(f"  {r['label']:<28} {us:>10} {sp:>8}  {'yes' if r['correct'] else 'NO: ' + str(r['error'])}")
    if not result["timing_available"]:
        lines.append("  timing unavailable " + (f"({result['error']})" if result.get("error") else
                                                "(no GPU: outputs compared only)"))
    return lines


def session_kernel(session, tmp_dir: Path) -> tuple[Task, Callable, str]:
    """The kernel a session contributes, as `sessions export` writes it: a dispatcher when the session
    has per-bucket keeps, else its best kernel."""
    task = load_task(session.meta.task, check_null=False)
    path = Path(tmp_dir) / f"{session.id}.py"
    if task.buckets:
        with contextlib.redirect_stdout(io.StringIO()):
            if export_session(session, path, task) != 0:
                raise E2EError(f"session {session.id}: export failed")
        what = ("dispatcher (per-bucket keeps)" if bucket_keeps(session)
                else f"best {session.workspace.best[:10]} (no per-bucket keeps)")
    else:
        path.write_text(session.workspace.source(session.workspace.best))
        what = f"best {session.workspace.best[:10]}"
    return task, load_kernel(task, path, session.id.replace("-", "_")), what


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))

__all__ = ["E2EError", "GraphCaptureError", "CudaGraphTimer", "wall_timer", "e2e_check", "run_e2e_check", "apply_e2e", "stack",
           "format_stack", "session_kernel", "load_workload_module", "load_kernel", "TaskError"]

"""Bottleneck profile: per shape, is a kernel bound by memory, compute or launch overhead?

The figures: bytes and flops from the task's reference (`bytes_moved`, `flops`), the kernel's
median time, and ceilings measured on this GPU (a 1 GiB device copy for bandwidth, a large bf16
matmul for compute, back-to-back tiny launches for launch cost). torch.profiler gives the launches
per call and the idle gaps between them; Nsight Compute metrics are added when `ncu` is on PATH.

`classify` is pure (figures in, verdict out) so it can be tested on synthetic numbers; everything
that touches a GPU is in `measure_*` / `profile_task`. Without a GPU only the roofline expectation
(arithmetic intensity against the ridge point of a hardware pack the person names) is given, marked
as not measured; no GPU's figures are assumed. torch and triton are imported in the functions that
measure (seconds to import; the prompt builder imports this module on every run).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from harness.authoring.hardware import specs_of
from harness.authoring.tasks import Shape, Task, load_module, load_task
from harness.profiling.measure import copy_bandwidth_Bps, do_bench_us

LAUNCH_BOUND_SHARE = 0.5  # launch cost + gaps at least half the time: fusing/graphs matter more than the kernel
NEAR_CEILING = 0.7  # at 70% of a ceiling a kernel is bound by it
FAR_FROM_CEILING = 0.2  # below 20% of both: latency/occupancy limits it, not a ceiling


@dataclass
class Ceilings:
    copy_gbs: float  # read+write bytes per second of a large device copy, GB/s
    matmul_tflops: float  # dense bf16 matmul, TFLOP/s
    launch_us: float  # host cost of one back-to-back kernel launch, us
    source: str = "measured"  # measured | pack:<id> (spec sheet, not measured)

    @property
    def ridge_flops_per_byte(self) -> float:
        return self.matmul_tflops * 1e12 / (self.copy_gbs * 1e9)


def classify(bytes_moved: float | None, flops: float | None, us: float | None, ceilings: Ceilings,
             launches: int = 1, kernel_us: float | None = None) -> dict[str, Any]:
    """Which ceiling a kernel is closest to, from its figures alone.

    us: the measured time per call; kernel_us: the GPU-busy part of it (sum of kernel durations);
    the rest, or launches x launch cost if larger, is launch overhead. Returns bound (memory |
    compute | launch | unknown), the fraction of each ceiling reached, and a one-line hint."""
    ai = flops / bytes_moved if flops and bytes_moved else None
    expected = None
    if ai is not None:
        expected = "memory" if ai < ceilings.ridge_flops_per_byte else "compute"
    elif bytes_moved:
        expected = "memory"
    out: dict[str, Any] = {"bytes": bytes_moved, "flops": flops, "us": us, "kernel_us": kernel_us,
                           "launches": launches, "arithmetic_intensity": ai,
                           "ridge": ceilings.ridge_flops_per_byte, "expected_bound": expected,
                           "memory_pct": None, "compute_pct": None, "launch_pct": None,
                           "bound": "unknown", "utilization": None, "hint": ""}
    if not us or us <= 0:
        out["hint"] = (f"not measured; arithmetic intensity {ai:.2f} flop/B vs ridge "
                       f"{ceilings.ridge_flops_per_byte:.0f}: expect {expected}-bound" if ai else
                       "not measured")
        return out
    mem_floor = (bytes_moved or 0) / (ceilings.copy_gbs * 1e3)  # GB/s -> bytes/us
    comp_floor = (flops or 0) / (ceilings.matmul_tflops * 1e6)  # TFLOP/s -> flop/us
    overhead = max(launches * ceilings.launch_us, us - kernel_us if kernel_us is not None else 0.0)
    mem, comp, launch = mem_floor / us, comp_floor / us, min(1.0, overhead / us)
    out.update(memory_pct=100 * mem, compute_pct=100 * comp, launch_pct=100 * launch)
    if launch >= LAUNCH_BOUND_SHARE:
        out["bound"] = "launch"
        out["hint"] = (f"launch-bound: {launch:.0%} of {us:.1f} us is launch overhead or gaps across {launches} "
                       f"launch(es); fuse launches or capture in a CUDA graph before tuning the kernel")
        out["utilization"] = "launch"
        return out
    bound, frac = ("memory", mem) if mem >= comp else ("compute", comp)
    out["bound"] = bound
    if frac >= NEAR_CEILING:
        out["utilization"] = "near ceiling"
    elif frac >= FAR_FROM_CEILING:
        out["utilization"] = "partial"
    else:
        out["utilization"] = "far from both ceilings (latency/occupancy)"
    ceiling = (f"{ceilings.copy_gbs:.0f} GB/s copy bandwidth" if bound == "memory"
               else f"{ceilings.matmul_tflops:.0f} TFLOP/s matmul peak")
    what = ("move fewer bytes (one pass, fused reads) or coalesce better" if bound == "memory"
            else "use tensor cores / cut redundant math")
    if frac < FAR_FROM_CEILING:
        what = "more parallelism per SM (more rows/programs in flight, fewer serial loops) before anything else"
    out["hint"] = f"{bound}-bound at {frac:.0%} of the {ceiling} ({ceilings.source}); {what}"
    return out


# -- ceilings -----------------------------------------------------------------------------------

def pack_ceilings(pack: Any) -> tuple[Ceilings | None, str]:
    """Spec-sheet ceilings from a hardware pack's [specs] (a harness.authoring.packs.Pack), for expectations
    only, and a phrase saying where they came from or why there are none."""
    specs = specs_of(pack.raw)
    missing = [k for k in ("mem_tb_s", "bf16_dense_tflops") if not specs.get(k)]
    if missing:
        return None, (f"hardware pack {pack.id} gives no {' or '.join(missing)}, so no roofline "
                      "expectation")
    return (Ceilings(specs["mem_tb_s"] * 1e3, specs["bf16_dense_tflops"], 4.0, f"pack:{pack.id}"),
            f"spec-sheet figures of hardware pack {pack.id} {pack.version}")


def measure_ceilings() -> Ceilings:
    # torch and triton (~1 s) only when something is measured: the TUI loads this module at its start
    import torch

    copy_gbs = copy_bandwidth_Bps() / 1e9
    m = 8192
    x = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
    tflops = 2 * m ** 3 / (do_bench_us(lambda: x @ y, rep_ms=200, warmup_ms=25) * 1e-6) / 1e12
    del x, y
    t = torch.zeros(1, device="cuda")
    for _ in range(100):
        t.add_(1)
    torch.cuda.synchronize()
    k = 2000
    t0 = time.perf_counter()
    for _ in range(k):
        t.add_(1)
    torch.cuda.synchronize()
    launch_us = (time.perf_counter() - t0) / k * 1e6
    torch.cuda.empty_cache()
    return Ceilings(copy_gbs, tflops, launch_us, "measured")


# -- per-kernel measurement ---------------------------------------------------------------------

def profiler_launches(fn: Callable[[], Any], calls: int = 5) -> dict[str, Any]:
    """Launches per call, GPU-busy time per call and idle gap inside a call, from torch.profiler."""
    import torch  # ~1 s: only when something is measured (as above)
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
            torch.cuda.synchronize()
    kernels = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                     key=lambda e: e.time_range.start)
    if not kernels:
        return {"launches": 0, "kernel_us": None, "gap_us": None, "names": []}
    per = max(1, len(kernels) // calls)
    busy, gaps = [], []
    for i in range(0, per * calls, per):
        group = kernels[i:i + per]
        dur = sum(e.time_range.elapsed_us() for e in group)
        span = group[-1].time_range.end - group[0].time_range.start
        busy.append(dur)
        gaps.append(max(0.0, span - dur))
    names = sorted({e.name for e in kernels[:per]})
    return {"launches": per, "kernel_us": sorted(busy)[len(busy) // 2], "gap_us": sorted(gaps)[len(gaps) // 2],
            "names": names}


NCU_METRICS = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed",
               "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread"]


def ncu_metrics(task: Task, candidate: Path, shape: Shape, timeout_s: int = 300,
                metrics: list[str] | tuple[str, ...] = tuple(NCU_METRICS)) -> dict[str, Any] | None:
    """Nsight Compute metrics for one shape (None when ncu isn't installed). Runs this module as a
    child under ncu so only the candidate's launches are profiled (--launch-skip warms Triton's JIT)."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return None
    cmd = [ncu, "--csv", "--metrics", ",".join(metrics), "--launch-skip", "3", "--launch-count", "1",
           sys.executable, "-m", "harness.profiling.profile", "--ncu-child", str(task.root), str(candidate), json.dumps(shape.dims)]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"ncu timed out after {timeout_s}s"}
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["ncu failed"])[-1][:300]}
    return parse_ncu_csv(r.stdout)


def parse_ncu_csv(text: str) -> dict[str, Any]:
    """{metric: value} from `ncu --csv` output (the first profiled kernel); noise lines before the header skipped."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    out: dict[str, Any] = {}
    for row in csv.DictReader(io.StringIO("\n".join(lines))):
        name, value = row.get("Metric Name"), row.get("Metric Value", "")
        if name and name not in out:
            try:
                out[name] = float(value.replace(",", ""))
            except ValueError:
                out[name] = value
        if "Kernel Name" in row and "kernel" not in out:
            out["kernel"] = row["Kernel Name"]
    return out


def _ncu_child(task_root: str, candidate: str, dims_json: str) -> int:
    import torch  # ~1 s: only when something is measured (as above)

    task = load_task(task_root, check_null=False)
    fn = getattr(load_module(Path(candidate), "warpsmith_ncu_candidate"), task.entry)
    inputs = task.load_reference().make_inputs(json.loads(dims_json), getattr(torch, task.dtypes[0]), 0, "cuda")
    for _ in range(5):
        fn(*inputs)
    torch.cuda.synchronize()
    return 0


def profile_task(task: Task, candidate: Path | None = None, shapes: list[str] | None = None,
                 ceilings: Ceilings | None = None, use_ncu: bool = True, pack: Any = None) -> dict[str, Any]:
    """The profile as a dict (for --json, the bench pane and the prompt). `pack`: a hardware pack
    whose spec-sheet figures give the expectation where nothing can be measured (no GPU)."""
    import torch  # ~1 s: only when something is measured (as above)

    ref = task.load_reference()
    gpu = torch.cuda.is_available()
    path = Path(candidate) if candidate else task.baseline_path
    dtype_name = task.dtypes[0]
    dtype = getattr(torch, dtype_name)
    # Real shapes even without a GPU: bytes and flops need no inputs, and toy sizes would mislead.
    wanted = [s for s in task.shapes if not shapes or s.name in shapes]
    out: dict[str, Any] = {"task": task.name, "candidate": str(path), "timing_available": gpu, "shapes": []}
    if gpu:
        ceilings = ceilings or measure_ceilings()
        out["device"] = torch.cuda.get_device_name(0)
        fn = getattr(load_module(path, "warpsmith_profile_candidate"), task.entry)
    else:
        # Nothing is measured here, and no GPU's ceilings are assumed: only a hardware pack the
        # person named (or the one detected) gives a ridge point to compare intensities against.
        why = "no hardware pack given (--pack ID): bytes, flops and intensity only"
        if ceilings is None and pack is not None:
            ceilings, why = pack_ceilings(pack)
        elif ceilings is not None:
            why = f"ceilings given ({ceilings.source})"
        out["device"] = "cpu (Triton interpreter): nothing measured"
        out["expectation_from"] = why
        fn = None
    out["ceilings"] = (asdict(ceilings) | {"ridge_flops_per_byte": ceilings.ridge_flops_per_byte}
                       if ceilings is not None else None)
    out["ncu"] = bool(shutil.which("ncu")) and use_ncu and gpu
    for s in wanted:
        b = ref.bytes_moved(s.dims, dtype) if hasattr(ref, "bytes_moved") else None
        f = ref.flops(s.dims) if hasattr(ref, "flops") else None
        row: dict[str, Any] = {"name": s.name, "dims": s.dims}
        if fn is not None:
            inputs = ref.make_inputs(s.dims, dtype, 0, "cuda")
            us = do_bench_us(lambda: fn(*inputs), rep_ms=100, warmup_ms=25)
            launches = profiler_launches(lambda: fn(*inputs))
            row.update(classify(b, f, us, ceilings, max(1, launches["launches"]), launches["kernel_us"]))
            row["gap_us"], row["kernel_names"] = launches["gap_us"], launches["names"]
            if out["ncu"]:
                row["ncu"] = ncu_metrics(task, path, s)
            del inputs
            torch.cuda.empty_cache()
        elif ceilings is not None:
            row.update(classify(b, f, None, ceilings))
        else:
            ai = f / b if f and b else None
            row.update({"bytes": b, "flops": f, "us": None, "arithmetic_intensity": ai, "expected_bound": None,
                        "bound": "unknown", "hint": "not measured (no GPU)" + (
                            f"; arithmetic intensity {ai:.2f} flop/B" if ai else "")})
        out["shapes"].append(row)
    return out


def format_profile(p: dict[str, Any]) -> list[str]:
    c = p["ceilings"]
    lines = [f"{p['task']}: {p['candidate']} on {p['device']}"]
    if not p.get("timing_available"):
        lines.append(f"nothing was measured (no GPU); expectation: {p.get('expectation_from', 'none')}")
    if c:
        launch = f", launch {c['launch_us']:.1f} us" if c["source"] == "measured" else ""
        lines.append(f"ceilings ({c['source']}): copy {c['copy_gbs']:.0f} GB/s, matmul {c['matmul_tflops']:.0f} "
                     f"TFLOP/s{launch}, ridge {c['ridge_flops_per_byte']:.0f} flop/B")
    lines.append(f"  {'shape':<22} {'us':>9} {'mem%':>6} {'comp%':>6} {'launch%':>7} {'launches':>8}  bound")

    def pct(v):
        return f"{v:.0f}" if isinstance(v, (int, float)) else "-"
    for s in p["shapes"]:
        us = f"{s['us']:.1f}" if s.get("us") else "-"
        lines.append(f"  {s['name'][:22]:<22} {us:>9} {pct(s.get('memory_pct')):>6} {pct(s.get('compute_pct')):>6} "
                     f"{pct(s.get('launch_pct')):>7} {s.get('launches', '-'):>8}  "
                     f"{s['bound'] if s.get('us') else ('expected ' + s['expected_bound'] if s.get('expected_bound') else '-')}")
        lines.append(f"      {s['hint']}")
        if s.get("ncu"):
            lines.append("      ncu: " + ", ".join(f"{k}={v}" for k, v in s["ncu"].items()))
    return lines


def prompt_section(p: dict[str, Any]) -> str:
    """A few lines for the agent's prompt: where the time goes, shape by shape."""
    head = "Bottleneck profile of the incumbent" + ("" if p["timing_available"] else " (not measured: no GPU)")
    return "\n".join([head + ":"] + [f"- {s['name']}: {s['hint']}" for s in p["shapes"]])


def run_profile(task: Task, candidate: Path | None = None, timeout_s: float = 600.0) -> dict[str, Any]:
    """profile_task in a child process with the evaluator's scrubbed environment: the incumbent is
    still agent-written code. On failure: {"error": ...} with the child's last stderr line."""
    # The evaluator package (~35 ms): the profiling child that runs this module (--child) doesn't need it.
    from harness.evaluate.process import scrubbed_env
    from harness.evaluate.sandbox import confine

    try:
        import torch  # ~1 s: only when something is measured (as above)

        on_gpu = torch.cuda.is_available()
    except Exception:
        on_gpu = False
    path = Path(candidate).resolve() if candidate else task.baseline_path
    cmd = [sys.executable, "-m", "harness.profiling.profile", "--child", str(task.root), str(path)]
    cwd = str(Path(__file__).resolve().parents[2])
    argv, env, cleanup = confine(cmd, scrubbed_env(on_gpu=on_gpu), on_gpu, [task.root, path], cwd)
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {"error": f"profile timed out after {timeout_s:.0f}s"}
    finally:
        cleanup()
    try:
        return json.loads((r.stdout.strip().splitlines() or [""])[-1])
    except json.JSONDecodeError:
        return {"error": f"profile child exited {r.returncode}: "
                         f"{(r.stderr.strip().splitlines() or ['no output'])[-1][:300]}"}


def cached_profile(task: Task, candidate: Path, cache_dir: Path, timeout_s: float = 600.0) -> dict[str, Any]:
    """run_profile, cached in cache_dir by the candidate's sha256 (profile the incumbent once per keep,
    not once per prompt)."""
    key = hashlib.sha256(Path(candidate).read_bytes()).hexdigest()[:16]
    f = Path(cache_dir) / f"profile-{task.name}-{key}.json"
    if f.is_file():
        return json.loads(f.read_text())
    p = run_profile(task, candidate, timeout_s)
    if "error" not in p:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        f.write_text(json.dumps(p, default=str))
    return p


def _child(task_root: str, candidate: str) -> int:
    p = profile_task(load_task(task_root, check_null=False), Path(candidate))
    print(json.dumps(p, default=str))
    return 0


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "--ncu-child":
    sys.exit(_ncu_child(*sys.argv[2:5]))
if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "--child":
    sys.exit(_child(*sys.argv[2:4]))

"""Where a model step spends its time: the task's end-to-end workload, broken down kernel by kernel.

`harness.profiling.profile` answers "is this kernel memory-, compute- or launch-bound?" shape by shape. This
module answers the question a person asks before naming the next idea: in one step of the model
the kernel lives in (the task's `e2e` workload: dsv4_decode_step, the softmax/rmsnorm decoder
block), which work dominates, how much is launch gaps or un-graphed work, and what would the whole
step gain if one piece reached its roofline (Amdahl)?

Two passes over the same step:
- costs (any device): one step under a TorchDispatchMode records each aten op's bytes (tensor
  inputs + outputs, views excluded) and flops (torch's own flop formulas, torch.utils.flop_counter);
  the task's plugged-in kernel is one row, its bytes its arguments plus its output.
- times (GPU only): torch.profiler over several eager steps attributes every GPU kernel to the top
  op (or the task kernel's `record_function` range) that launched it; the step itself is timed
  with CUDA events, eagerly and as a CUDA-graph replay, outside the profiler.
Without a GPU only the first pass runs: rows are ranked by their roofline expectation from a
hardware pack, and the profile says plainly that nothing was measured.

`build_rows` is pure (figures in, rows out) so the arithmetic is tested on synthetic numbers.
"""
from __future__ import annotations

import json
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from harness.model.e2e import CudaGraphTimer, GraphCaptureError, load_kernel, load_workload_module
from harness.profiling.profile import NCU_METRICS, Ceilings, classify, measure_ceilings, ncu_metrics, profile_task
from harness.authoring.tasks import load_task

# torch, and harness.model.e2e which loads kernels with it, stay inside the functions that measure: start-up time
# (torch takes seconds, and tui/screens/profile.py imports this module for its data classes).

STEP_RANGE = "warpsmith::step"
GAP_ROW = "idle between kernels (graph replay)"
TASK_RANGE = "warpsmith::task:"  # + task name: the plugged-in kernel's calls
# Ops that move no data of their own (allocations, aliasing): never a row.
_NO_WORK = ("aten::empty", "aten::new_empty", "aten::empty_like", "aten::empty_strided", "aten::lift_fresh",
            "aten::detach", "aten::alias", "aten::set_", "aten::resize_", "aten::_local_scalar_dense")


@dataclass
class StepRow:
    name: str  # "softmax (task kernel)", "aten::mm", or a kernel name nothing claimed
    kind: str  # task | op | unattributed
    calls: int = 0  # per step
    launches: float = 0.0  # GPU kernels per step (measured)
    device_us: float | None = None  # GPU time per step (measured)
    share: float | None = None  # of the step's time
    bytes: float | None = None  # per step
    flops: float | None = None  # per step
    roofline_us: float | None = None  # max(bytes / bandwidth, flops / peak)
    roofline_pct: float | None = None  # roofline_us / device_us
    bound: str = "unknown"
    gain: float | None = None  # the whole step's speedup if this row ran at its roofline
    kernels: list[str] = field(default_factory=list)  # the first few kernel names
    # The row's first call as the step made it, for `n` on the profile screen (a task of this op):
    # {"op": "aten.mm.default", "args": [...]} with tensors as {"shape", "dtype"}; None for the
    # task's own kernel, or arguments a task can't be made from (harness.authoring.optask).
    example: dict | None = None

    def idea_context(self, p: "StepProfile") -> str:
        """The line an idea starts from when a person picks this row on the profile screen."""
        where = f"{p.workload} on {p.device}" if p.measured else f"{p.workload}, expected, not measured"
        bits = [f"{self.name}"]
        if self.share is not None:
            bits.append(f"{100 * self.share:.0f}% of the step")
        if self.bound != "unknown":
            bits.append(f"{self.bound}-bound")
        if self.roofline_pct is not None:
            bits.append(f"at {100 * self.roofline_pct:.0f}% of its roofline")
        if self.gain is not None:
            bits.append(f"step {self.gain:.2f}x faster at its roofline")
        # No square brackets: ideas are shown in Textual widgets and sent to agents as plain text.
        return f"From the step profile ({where}): " + ", ".join(bits) + ". Idea: "


@dataclass
class StepProfile:
    task: str
    workload: str  # the workload's own description
    device: str
    measured: bool  # False: no GPU, expectations from a hardware pack only
    ceilings: dict | None  # harness.profiling.profile.Ceilings as a dict, or None (no pack, no GPU)
    rows: list[StepRow]
    step_us: float | None = None  # the step as served: CUDA-graph replay if it captures, else eager
    eager_us: float | None = None
    graph_us: float | None = None
    busy_us: float | None = None  # sum of the rows' GPU time per step
    accounted_pct: float | None = None  # busy_us / step_us: how much of the step the rows explain
    gaps_us: float | None = None  # step time no row explains (the replay's launch, the timer's events)
    replay_span_us: float | None = None  # a graph replay from its first kernel's start to its last one's end
    graph_coverage: float | None = None  # kernels in a graph replay / kernels of an eager step
    launches: float | None = None  # GPU kernels per eager step
    note: str = ""
    candidate: str = ""  # what was plugged in for the task: a commit or a file
    kernel_shapes: list = field(default_factory=list)  # the task's kernel alone, shape by shape (harness.profiling.profile)
    ncu: dict = field(default_factory=dict)  # counters of the task's kernel on its largest shape, or {"note": why not}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "StepProfile":
        d = dict(d)
        d["rows"] = [StepRow(**{k: v for k, v in r.items() if k in StepRow.__dataclass_fields__}) for r in d["rows"]]
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=1))

    @classmethod
    def load(cls, path: Path) -> "StepProfile":
        return cls.from_json(json.loads(path.read_text()))


# -- pure arithmetic ------------------------------------------------------------------------------

def roofline_us(bytes_: float | None, flops: float | None, c: Ceilings) -> float | None:
    """The shortest time the hardware allows: bytes at copy bandwidth or flops at the matmul peak."""
    t = []
    if bytes_:
        t.append(bytes_ / (c.copy_gbs * 1e3))  # GB/s = 1e3 bytes per us
    if flops:
        t.append(flops / (c.matmul_tflops * 1e6))  # TFLOP/s = 1e6 flops per us
    return max(t) if t else None


def build_rows(costs: dict[str, dict], times: dict[str, dict] | None, step_us: float | None,
               ceilings: Ceilings | None, calls_per_step: int = 1) -> list[StepRow]:
    """Rows ranked by GPU time (measured) or by roofline expectation (not measured).

    costs: {row name: {kind, calls, bytes, flops}} for one step; times: {row name: {kind, device_us,
    launches, kernels}} per step (None without a GPU). A measured row nothing costed (a kernel the
    profiler couldn't attribute) still appears, with no roofline."""
    names = list(dict.fromkeys([*(times or {}), *costs]))
    rows = []
    for n in names:
        c, t = costs.get(n, {}), (times or {}).get(n, {})
        if times is not None and not t:
            continue  # costed but launched no kernel (a copy folded away, a CPU-side op): not step time
        r = StepRow(name=n, kind=t.get("kind") or c.get("kind", "op"), calls=int(c.get("calls", 0)),
                    launches=float(t.get("launches", 0.0)), device_us=t.get("device_us"),
                    bytes=c.get("bytes") or None, flops=c.get("flops") or None, kernels=list(t.get("kernels", []))[:4],
                    example=c.get("example"))
        if ceilings is not None:
            r.roofline_us = roofline_us(r.bytes, r.flops, ceilings)
            cl = classify(r.bytes, r.flops, r.device_us, ceilings, max(1, int(round(r.launches)) or 1), r.device_us)
            r.bound = cl["bound"] if r.device_us else (cl.get("expected_bound") or "unknown")
        if r.device_us and r.roofline_us:
            r.roofline_pct = min(r.roofline_us / r.device_us, 1.0)
        if r.device_us and step_us:
            r.share = r.device_us / step_us
            if r.roofline_us is not None:
                r.gain = step_us / max(step_us - r.device_us + min(r.roofline_us, r.device_us), 1e-9)
        rows.append(r)
    if times is not None:
        rows.sort(key=lambda r: -(r.device_us or 0.0))
    else:
        rows.sort(key=lambda r: -(r.roofline_us or 0.0))
        total = sum(r.roofline_us or 0.0 for r in rows)
        for r in rows:  # expected shares: of the step as the roofline would have it
            r.share = (r.roofline_us or 0.0) / total if total else None
    return rows


# -- pass 1: bytes and flops per op ---------------------------------------------------------------

def _tensors(x: Any) -> list:
    import torch  # torch (~1 s) only when a step is profiled: the TUI loads this module at its start
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(x) if isinstance(t, torch.Tensor)]


def _nbytes(ts: list) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _storage(t: Any) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except Exception:  # noqa: BLE001 - meta/sparse tensors have none: not a view of anything here
        return None


class _Costs:
    """Accumulates {row: {kind, calls, bytes, flops}} while one step runs."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}
        self.inside_task = 0  # >0 while a plugged-in kernel runs: its own torch calls are its business

    def add(self, name: str, kind: str, bytes_: float, flops: float, call: tuple | None = None) -> None:
        r = self.rows.setdefault(name, {"kind": kind, "calls": 0, "bytes": 0.0, "flops": 0.0})
        if call is not None and "example" not in r:
            r["example"] = op_example(*call)
        r["calls"] += 1
        r["bytes"] += bytes_
        r["flops"] += flops


def op_example(func: Any, args: tuple, kwargs: dict) -> dict | None:
    """An op's call as JSON: tensors by shape and dtype, plain values as they are. None where an
    argument is something else (a generator, a tensor list with a layout, a symbolic size...)."""
    def arg(a: Any) -> Any:
        if hasattr(a, "shape") and hasattr(a, "dtype") and hasattr(a, "stride"):
            return {"shape": list(a.shape), "dtype": str(a.dtype).removeprefix("torch.")}
        if a is None or isinstance(a, (bool, int, float, str)):
            return a
        if isinstance(a, (list, tuple)):
            return [arg(x) for x in a]
        raise TypeError(type(a).__name__)

    try:
        return {"op": str(func), "args": [arg(a) for a in args], "kwargs": {k: arg(v) for k, v in kwargs.items()}}
    except TypeError:
        return None


def _flops(func: Any, args: tuple, kwargs: dict, out: Any) -> float:
    """torch's own flop formula for the op (matmuls, convolutions, attention), else 0."""
    # torch (~1 s) only when a step is profiled: the TUI loads this module at its start
    from torch.utils.flop_counter import flop_registry

    fn = flop_registry.get(func._overloadpacket)
    if fn is None:
        return 0.0
    try:
        return float(fn(*args, **kwargs, out_val=out))
    except Exception:  # noqa: BLE001 - a formula that can't read these args: no flops known
        return 0.0


def _dispatch_mode(costs: _Costs):
    # torch (~1 s) only when a step is profiled: the TUI loads this module at its start
    from torch.utils._python_dispatch import TorchDispatchMode

    class Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if costs.inside_task:
                return out
            name = func._schema.name  # "aten::mm", as torch.profiler names the op
            if name.startswith(_NO_WORK) or not name.startswith("aten::"):  # profiler::, our own ranges
                return out
            ins, outs = _tensors((args, kwargs)), _tensors(out)
            in_storages = {_storage(t) for t in ins}
            if func._schema.is_mutable and ins:
                # In place (add_, copy_, index_put_): the destination is touched where the other
                # operands land, not whole; a fill with no other operand writes all of it.
                others = ins[1:]
                nbytes = 2 * _nbytes(others) if others else _nbytes(ins[:1])
                costs.add(name, "op", nbytes, _flops(func, args, kwargs, out), (func, args, kwargs))
                return out
            if outs and all(_storage(t) in in_storages for t in outs):
                return out  # a view: no kernel, no bytes
            costs.add(name, "op", _nbytes(ins) + _nbytes(outs), _flops(func, args, kwargs, out),
                      (func, args, kwargs))
            return out

    return Mode()


class _Plug:
    """What the plugged-in kernels' wrappers do on the current pass over the one workload: count
    their bytes (`costs`), collect the GPU kernels they launch (`names`), or just run inside their
    profiler range (neither)."""

    def __init__(self) -> None:
        self.costs: _Costs | None = None
        self.names: dict[str, set[str]] | None = None


def wrap_kernels(kernels: dict[str, Callable], plug: _Plug) -> dict[str, Callable]:
    """Each plugged-in kernel inside a named profiler range, doing what `plug` asks on this pass."""
    import torch  # torch (~1 s) only when a step is profiled: the TUI loads this module at its start

    def wrap(task: str, fn: Callable) -> Callable:
        def call(*args, **kwargs):
            with torch.profiler.record_function(TASK_RANGE + task):
                if plug.names is not None:
                    return _launched(fn, args, kwargs, plug.names.setdefault(task, set()))
                costs = plug.costs
                if costs is None:
                    return fn(*args, **kwargs)
                costs.inside_task += 1
                try:
                    out = fn(*args, **kwargs)
                finally:
                    costs.inside_task -= 1
                costs.add(f"{task} (task kernel)", "task", _nbytes(_tensors((args, kwargs))) + _nbytes(_tensors(out)), 0.0)
                return out
        return call

    return {k: wrap(k, f) for k, f in kernels.items()}


def measure_costs(workload: Any, plug: _Plug) -> dict[str, dict]:
    """One step of the workload, with every op's bytes and flops counted."""
    plug.costs = costs = _Costs()
    try:
        workload.run()  # warm: compile, autotune, lazy allocations stay out of the counts
        costs.rows.clear()
        with _dispatch_mode(costs):
            workload.run()
    finally:
        plug.costs = None
    return costs.rows


# -- pass 2: GPU time per row (torch.profiler) ----------------------------------------------------

def _task_of(evt: Any) -> str | None:
    return evt.name[len(TASK_RANGE):] if evt.name.startswith(TASK_RANGE) else None


def _owned_kernels(evt: Any, task: str | None, out: list) -> None:
    """(row, kind, kernel) for every kernel under `evt`: a task range claims all below it; else
    each kernel belongs to the innermost op that launched it (aten::mm, not the aten::matmul
    around it: the op the cost pass counted bytes and flops for)."""
    task = task or _task_of(evt)
    for k in evt.kernels:
        out.append((f"{task} (task kernel)", "task", k) if task else (evt.name, "op", k))
    for c in evt.cpu_children:
        _owned_kernels(c, task, out)


def device_work(events: list) -> list:
    """The GPU's own work among torch.profiler's events: kernels, copies and sets, not the CPU side
    and not the GPU side of range annotations (ours, the profiler's steps)."""
    # torch (~1 s) only when a step is profiled: the TUI loads this module at its start
    from torch.autograd import DeviceType

    return [e for e in events if e.device_type != DeviceType.CPU
            and not str(getattr(e, "activity_type", "")).endswith("user_annotation")
            and not e.name.startswith(("warpsmith::", "ProfilerStep"))]


def attribute_kernels(events: list, steps: int, task_kernels: dict[str, set[str]] | None = None
                      ) -> tuple[dict[str, dict], float, float]:
    """{row: {kind, device_us, launches, kernels}} per step from torch.profiler's events, the GPU
    time per step of every kernel, attributed or not, and kernels per step.

    A kernel belongs to the op that launched it, or to the task kernel when it ran inside the
    task's range. Triton launches go through the driver, which the profiler does not tie to the
    enclosing range: `task_kernels` (the names the task's call launched, profiled on its own)
    claims those. What nothing claims (a Triton kernel the workload launches itself) gets a row of
    its own kernel name, so the rows always add up to every kernel the GPU ran."""
    # torch (~1 s) only when a step is profiled: the TUI loads this module at its start
    from torch.autograd import DeviceType

    times: dict[str, dict] = {}
    claimed: dict[str, float] = {}

    def add(row: str, kind: str, name: str, us: float, launches: float) -> None:
        r = times.setdefault(row, {"kind": kind, "device_us": 0.0, "launches": 0.0, "kernels": []})
        r["device_us"] += us
        r["launches"] += launches
        if name not in r["kernels"]:
            r["kernels"].append(name)

    for e in events:
        parent = e.cpu_parent
        if e.device_type != DeviceType.CPU or parent is None or parent.name != STEP_RANGE:
            continue
        owned: list = []
        _owned_kernels(e, None, owned)
        for row, kind, k in owned:
            add(row, kind, k.name, k.duration / steps, 1 / steps)
            claimed[k.name] = claimed.get(k.name, 0.0) + k.duration / steps
    total, n = 0.0, 0
    ran: dict[str, list[float]] = {}
    for e in device_work(events):
        us = (e.time_range.end - e.time_range.start) / steps
        total += us
        n += 1
        ran.setdefault(e.name, [0.0, 0.0])
        ran[e.name][0] += us
        ran[e.name][1] += 1 / steps
    owner = {k: t for t, ks in (task_kernels or {}).items() for k in ks}
    for name, (us, count) in ran.items():
        rest = us - claimed.get(name, 0.0)
        if rest > 1e-3 * max(total, 1e-9):
            share = rest / us if us else 0.0
            if name in owner:
                add(f"{owner[name]} (task kernel)", "task", name, rest, count * share)
            else:
                add(f"kernel {name}", "unattributed", name, rest, count * share)
    return times, total, n / steps


def _launched(fn: Callable, args: tuple, kwargs: dict, into: set[str]) -> Any:
    """Call fn alone under a profiler and add the names of the GPU kernels it launched."""
    import torch  # torch (~1 s) only when a step is profiled: the TUI loads this module at its start
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        out = fn(*args, **kwargs)
        torch.cuda.synchronize()
    into |= {e.name for e in prof.events() if e.device_type != DeviceType.CPU}
    return out


def task_kernel_names(workload: Any, plug: _Plug) -> dict[str, set[str]]:
    """The GPU kernels each plugged-in kernel launches, from one workload step in which only its
    calls run under a profiler (Triton's launches carry no link to the range around them)."""
    plug.names = {}
    try:
        workload.run()
        return plug.names
    finally:
        plug.names = None


def _events_timer(fn: Callable[[], Any], reps: int) -> float:
    import torch  # torch (~1 s) only when a step is profiled: the TUI loads this module at its start

    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    fn()
    torch.cuda.synchronize()
    for a, b in zip(starts, ends):
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) * 1e3 for a, b in zip(starts, ends))


def replay_gaps(intervals: list[tuple[float, float]], steps: int) -> dict[str, float | None]:
    """Per graph replay (steps replays, synchronised apart, so in start order each replay's
    intervals are one run of len/steps): the span from the first kernel's start to the last one's
    end, the time some kernel was running (the union of the intervals: kernels may overlap), and
    the idle time between them — the launch gaps a graph still has, measured, not inferred."""
    if not intervals or steps < 1 or len(intervals) % steps:
        return {"replay_span_us": None, "replay_busy_us": None, "replay_idle_us": None}
    per = len(intervals) // steps
    ivs = sorted(intervals)
    spans, busys = [], []
    for k in range(steps):
        chunk = ivs[k * per:(k + 1) * per]
        busy, cur_s, cur_e = 0.0, chunk[0][0], chunk[0][1]
        for a, b in chunk[1:]:
            if a > cur_e:
                busy += cur_e - cur_s
                cur_s, cur_e = a, b
            else:
                cur_e = max(cur_e, b)
        busy += cur_e - cur_s
        spans.append(max(b for _, b in chunk) - chunk[0][0])
        busys.append(busy)
    span, busy = statistics.median(spans), statistics.median(busys)
    return {"replay_span_us": span, "replay_busy_us": busy, "replay_idle_us": max(span - busy, 0.0)}


def measure_times(workload: Any, steps: int = 10, task_kernels: dict[str, set[str]] | None = None) -> dict[str, Any]:
    """Eager and graph-replayed step times (events, no profiler), then a profiled run."""
    import torch  # torch (~1 s) only when a step is profiled: the TUI loads this module at its start
    from torch.profiler import ProfilerActivity, profile, record_function

    out: dict[str, Any] = {"eager_us": _events_timer(workload.run, steps)}
    graph_timer = CudaGraphTimer()
    try:
        out["graph_us"] = statistics.median(graph_timer(workload.run, steps))
        out["graph_error"] = None
    except GraphCaptureError as e:
        out["graph_us"], out["graph_error"] = None, str(e)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(steps):
            with record_function(STEP_RANGE):
                workload.run()
        torch.cuda.synchronize()
    out["times"], out["busy_us"], out["launches"] = attribute_kernels(list(prof.events()), steps, task_kernels)
    if out["graph_us"] is not None:  # how many of an eager step's kernels a graph replay runs
        g = next(iter(graph_timer.graphs.values()))
        with profile(activities=[ProfilerActivity.CUDA]) as gprof:
            for _ in range(steps):
                g.replay()
                torch.cuda.synchronize()  # replays apart: each one's span is measured on its own
        dev_events = device_work(list(gprof.events()))
        replayed = len(dev_events) / steps
        out["graph_coverage"] = min(replayed / out["launches"], 1.0) if out["launches"] else None
        out.update(replay_gaps([(e.time_range.start, e.time_range.end) for e in dev_events], steps))
    else:
        out["graph_coverage"] = 0.0
    return out


# -- the task's own kernel, per shape, and its counters -----------------------------------------

# Warp-state stall reasons (Nsight Compute's WarpStateStats section: average warps stalled per
# issued instruction, for compute capability 7.0 and later).
STALL_REASONS = ("long_scoreboard", "short_scoreboard", "barrier", "mio_throttle", "lg_throttle",
                 "math_pipe_throttle", "wait", "not_selected", "no_instruction", "membar")
_STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


def kernel_shapes(task: Any, candidate: Path, ceilings: Ceilings | None, measured: bool) -> list[dict]:
    """harness.profiling.profile's per-shape rows for the task's kernel (measured on a GPU; else expected)."""
    if ceilings is None:
        return []
    p = profile_task(task, candidate, ceilings=ceilings, use_ncu=False)
    keep = ("name", "us", "bound", "expected_bound", "memory_pct", "compute_pct", "launch_pct", "hint")
    return [{k: s.get(k) for k in keep} for s in p["shapes"]]


def ncu_detail(task: Any, candidate: Path, timeout_s: int = 300) -> dict:
    """Memory throughput, occupancy and the top stall reasons of the task's kernel on its largest
    shape, from Nsight Compute; a plain note where ncu is absent or can't read the counters."""
    shape = max(task.shapes, key=lambda s: sum(v for v in s.dims.values() if isinstance(v, (int, float))))
    m = ncu_metrics(task, candidate, shape, timeout_s, [*NCU_METRICS, *(_STALL.format(r) for r in STALL_REASONS)])
    if m is None:
        return {"note": "Nsight Compute (ncu) is not on PATH: no hardware counters (memory throughput, "
                        "occupancy, stall reasons) for the task's kernel"}
    if "error" in m:
        return {"note": f"ncu could not read the counters: {m['error'][:240]}"}
    stalls = sorted(((r_, m.get(_STALL.format(r_))) for r_ in STALL_REASONS
                     if isinstance(m.get(_STALL.format(r_)), float)), key=lambda kv: -kv[1])
    return {"shape": shape.name, "kernel": m.get("kernel"),
            "dram_pct": m.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
            "sm_pct": m.get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
            "occupancy_pct": m.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
            "registers": m.get("launch__registers_per_thread"),
            "top_stalls": [{"reason": k, "warps_per_issue": v} for k, v in stalls[:3]]}


# -- the profile ----------------------------------------------------------------------------------

def profile_step(task: Any, candidate: Path | None = None, *, device: str | None = None,
                 pack_ceilings: Ceilings | None = None, steps: int = 10,
                 ceilings: Ceilings | None = None, use_ncu: bool = True) -> StepProfile:
    """The task's end-to-end step with `candidate` (default: the task's kernel.py) plugged in.

    On a GPU everything is measured (ceilings too, unless given); elsewhere the rows are ranked by
    their roofline under `pack_ceilings` (a hardware pack's figures), or carry no roofline at all."""
    import torch  # torch (~1 s) only when a step is profiled: the TUI loads this module at its start

    mod = load_workload_module(task)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    cand = Path(candidate) if candidate else task.baseline_path
    fn = load_kernel(task, cand, "step_profile")
    plug = _Plug()
    # One workload for every pass: the wrappers change what they do, the buffers stay.
    workload = mod.build(wrap_kernels({task.name: fn}, plug), device)
    costs = measure_costs(workload, plug)
    desc = getattr(workload, "description", getattr(mod, "__name__", "workload"))
    if device != "cuda":
        rows = build_rows(costs, None, None, pack_ceilings)
        src = pack_ceilings.source if pack_ceilings else None
        note = ("nothing was measured: no GPU here. " +
                (f"Rows are ranked by their roofline time under {src}'s figures (bytes at its bandwidth, "
                 "flops at its bf16 peak)." if src else
                 "No hardware pack is selected, so no roofline either: pick one (p, or --pack) for expectations."))
        return StepProfile(task.name, desc, "cpu", False, asdict(pack_ceilings) if pack_ceilings else None, rows,
                           note=note, kernel_shapes=kernel_shapes(task, cand, pack_ceilings, False),
                           ncu={"note": "no GPU here: no hardware counters"})
    ceilings = ceilings or measure_ceilings()
    t = measure_times(workload, steps, task_kernel_names(workload, plug))
    step_us = t["graph_us"] or t["eager_us"]
    rows = build_rows(costs, t["times"], step_us, ceilings)
    if t["graph_us"] and t.get("replay_idle_us") is not None:
        # The graph's own idle time between kernels, measured on the replay's timeline: a row, so
        # the rows account for the step (the rest is the replay's launch and the timer's events).
        idle = t["replay_idle_us"]
        rows.append(StepRow(name=GAP_ROW, kind="gap", launches=0.0, device_us=idle,
                            share=idle / step_us if step_us else None, bound="launch",
                            gain=step_us / max(step_us - idle, 1e-9) if step_us else None))
        rows.sort(key=lambda r: -(r.device_us or 0.0))
    busy = sum(r.device_us or 0.0 for r in rows)
    note = "" if t["graph_us"] else f"the step is not CUDA-graph captured ({t['graph_error']}): times are eager"
    return StepProfile(task.name, desc, torch.cuda.get_device_name(0), True, asdict(ceilings), rows,
                       step_us=step_us, eager_us=t["eager_us"], graph_us=t["graph_us"], busy_us=busy,
                       accounted_pct=100 * busy / step_us if step_us else None,
                       gaps_us=max(step_us - busy, 0.0), replay_span_us=t.get("replay_span_us"),
                       graph_coverage=t["graph_coverage"],
                       launches=t["launches"], note=note, kernel_shapes=kernel_shapes(task, cand, ceilings, True),
                       ncu=ncu_detail(task, cand) if use_ncu else {"note": "Nsight Compute skipped (--no-ncu)"})


def header_lines(p: StepProfile) -> list[str]:
    """What was profiled, the step's totals, the ceilings and the note: above the table."""
    def f(v, spec):
        return f"{v:{spec}}" if isinstance(v, (int, float)) else "-"

    lines = [f"{p.task}: {p.workload} on {p.device}"]
    if p.measured:
        cov = 100 * p.graph_coverage if p.graph_coverage is not None else None
        lines.append(f"step {f(p.step_us, '.1f')} us ({'CUDA-graph replay' if p.graph_us else 'eager'}); eager "
                     f"{f(p.eager_us, '.1f')} us; the rows add up to {f(p.busy_us, '.1f')} us = {f(p.accounted_pct, '.0f')}% of "
                     f"the step; unexplained {f(p.gaps_us, '.1f')} us; replay span {f(p.replay_span_us, '.1f')} us; {f(p.launches, '.0f')} launches/step; graph coverage "
                     f"{f(cov, '.0f')}%")
    if p.ceilings:
        c = p.ceilings
        lines.append(f"ceilings ({c['source']}): copy {c['copy_gbs']:.0f} GB/s, bf16 matmul {c['matmul_tflops']:.0f} TFLOP/s")
    if p.note:
        lines.append(p.note)
    return lines


def format_step_profile(p: StepProfile, limit: int = 15) -> list[str]:
    """The table `warpsmith profile TASK --e2e` prints."""
    def f(v, spec, unit=""):
        return f"{v:{spec}}{unit}" if isinstance(v, (int, float)) else "-"

    lines = header_lines(p)
    t_head = "us/step" if p.measured else "roof us"
    lines.append(f"  {'#':>2} {'what':<34} {'share':>6} {t_head:>9} {'launch':>6} {'roof%':>6} {'bound':<8} {'gain':>6}")
    for i, r in enumerate(p.rows[:limit], 1):
        t = r.device_us if p.measured else r.roofline_us
        lines.append(f"  {i:>2} {r.name[:34]:<34} {f(100 * r.share if r.share is not None else None, '.1f', '%'):>6} "
                     f"{f(t, '.1f' if p.measured else '.4f'):>9} {f(r.launches if p.measured else None, '.0f'):>6} "
                     f"{f(100 * r.roofline_pct if r.roofline_pct is not None else None, '.0f', '%'):>6} "
                     f"{r.bound:<8} {f(r.gain, '.2f', 'x'):>6}")
    if len(p.rows) > limit:
        lines.append(f"  ... {len(p.rows) - limit} more rows (--json for all)")
    return lines + kernel_lines(p)


def kernel_lines(p: StepProfile) -> list[str]:
    """The task's own kernel below the step: shape by shape, then its counters (or why none)."""
    out = []
    if p.kernel_shapes:
        out.append(f"{p.task}'s kernel alone, per shape ({'measured' if p.measured else 'expected'}):")
        for s in p.kernel_shapes:
            us = f"{s['us']:.1f} us" if s.get("us") else "not timed"
            out.append(f"  {s['name'][:24]:<24} {us:>12}  {s.get('bound') if s.get('us') else 'expected ' + str(s.get('expected_bound'))}"
                       f": {s.get('hint') or ''}")
    n = p.ncu or {}
    if n.get("note"):
        out.append(n["note"])
    elif n:
        stalls = ", ".join(f"{x['reason']} {x['warps_per_issue']:.2f}" for x in n.get("top_stalls", [])) or "none read"
        def pct(v):
            return f"{v:.0f}%" if isinstance(v, (int, float)) else "-"
        out.append(f"ncu on {n.get('shape')}: DRAM {pct(n.get('dram_pct'))} of peak, SM {pct(n.get('sm_pct'))}, "
                   f"occupancy {pct(n.get('occupancy_pct'))}, {n.get('registers', '-')} registers/thread; "
                   f"top stalls (warps per issue): {stalls}")
    return out


def prompt_section(p: StepProfile, limit: int = 5) -> str:
    """A few lines for an LLM agent's prompt: what dominates the step the kernel lives in."""
    what = "measured" if p.measured else "expected from the hardware pack, not measured"
    lines = [f"Where one step of {p.workload} spends its time ({what}; top {min(limit, len(p.rows))}):"]
    for r in p.rows[:limit]:
        bits = [f"{100 * r.share:.0f}% of the step" if r.share is not None else "share unknown", r.bound]
        if r.roofline_pct is not None:
            bits.append(f"{100 * r.roofline_pct:.0f}% of roofline")
        if r.gain is not None:
            bits.append(f"step {r.gain:.2f}x at roofline")
        lines.append(f"- {r.name}: " + ", ".join(bits))
    if p.measured and p.graph_coverage is not None and p.graph_coverage < 0.99:
        lines.append(f"- only {100 * p.graph_coverage:.0f}% of the step's kernels are CUDA-graph captured")
    return "\n".join(lines)


def _main(argv: list[str] | None = None) -> int:
    """`python -m harness.model.step_profile TASK [CANDIDATE] [--pack ID] [-o FILE]`: the TUI runs the
    profile in this separate process, so a candidate's import never shares the UI's process."""
    # Local: only this entry point parses arguments or reads packs (the TUI imports the module for its
    # data classes); pack_ceilings is imported here because profile_step's parameter has its name.
    import argparse

    from harness.authoring.packs import discover
    from harness.profiling.profile import pack_ceilings

    ap = argparse.ArgumentParser(prog="python -m harness.model.step_profile")
    ap.add_argument("task")
    ap.add_argument("candidate", nargs="?")
    ap.add_argument("--pack", default="")
    ap.add_argument("-o", "--output", required=True, help="a file, or - for one JSON line on stdout")
    a = ap.parse_args(argv)
    try:
        ceilings = pack_ceilings(discover().get(a.pack))[0] if a.pack else None
        p = profile_step(load_task(a.task, check_null=False), Path(a.candidate) if a.candidate else None,
                         pack_ceilings=ceilings)
    except Exception as e:  # noqa: BLE001 - reported to the parent in one line
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if a.output == "-":
        print(json.dumps(p.to_json()))
    else:
        p.save(Path(a.output))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())

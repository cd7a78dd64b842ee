"""The child process: imports candidate code and runs it on request, watched by the guards.

Started by runner.py as `python -m harness.evaluate.child RFD WFD SOCK` in its own temporary cwd, with a
scrubbed environment. Order matters: read the channel key, load the task's reference module, set
up the guards and take the identity snapshot, and only then import any candidate code. The child
never decides correctness: it sends raw outputs and guard observations to the parent, which
computes the reference itself (in a process the candidate never ran in).

Everything in this process is within the candidate's reach (docs/threat-model.md): its guards are
hints that name the blunt spellings. What decides is the OS sandbox around it (sandbox.py), the
parent's clock (parent_clock.py) and the parent's comparison of the bytes it receives.
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from harness.authoring import contract
from harness.evaluate import guards
from harness.evaluate.channel import Endpoint, _read_exact, rows_to_check
from harness.authoring.tasks import load_module  # (loaded already, through harness.evaluate's __init__)

TRACE_TAIL = 4000


class Child:
    def __init__(self, ep: Endpoint, job: dict, startup: dict[str, float]):
        t0 = time.monotonic()
        # torch, triton, cutlass and the harness modules that load them are imported inside functions
        # in this file: the order is part of the guard (preload, reference, identity snapshot, then the
        # candidate), and each import's time is reported as start-up phases.
        import torch

        startup["import_torch"] = time.monotonic() - t0

        self.ep = ep
        self.job = job
        self.torch = torch
        self.on_gpu = bool(job["on_gpu"])
        self.device = "cuda" if self.on_gpu else "cpu"
        self.dtype = getattr(torch, job["dtype"])
        root = Path(job["task_root"])
        self.ref = load_module(root / "reference.py", "warpsmith_task_reference")
        sys.modules["warpsmith_task_reference"] = self.ref  # findable anyway; red-team tests use the name
        self.make_inputs = self.ref.make_inputs
        self.reference = self.ref.reference
        # Bound before any candidate code runs: a contract case's view or mask is built by this function,
        # the parent's copy by the same one (rebinding the module's name afterwards changes nothing here).
        self.contract_inputs = contract.apply
        self.modules: dict[str, Any] = {}
        self.entries: dict[str, Any] = {}
        self.dsl = job.get("dsl", "triton")
        t_dsl = time.monotonic()
        # Installed before any candidate code runs (a CuTe task imports cutlass here: ~2 s).
        self.counter = guards.launch_counter(self.dsl)
        if self.dsl == "cute":
            startup["import_cutlass"] = time.monotonic() - t_dsl
        t1 = time.monotonic()
        self._warm_up()
        startup["warm_up"] = time.monotonic() - t1
        # What the torch-compute watch permits, frozen before any candidate code runs (guards.WatchSettings).
        self.watch_settings = guards.watch_settings()
        self.watch_digest = self.watch_settings.digest()
        with guards.TorchComputeWatch(self.watch_settings):  # imports what the watch needs before the identity snapshot
            torch.empty(1) + 1
        self.native_threads = guards.native_thread_count()
        from harness.evaluate import timing  # (loaded in preload, a timed start-up phase; only bound here)

        self.timing = timing
        self.timing_sources: tuple | None = None  # timing.time_shape's inputs, kept for a keep_sources request
        self.snapshot = guards.identity_snapshot(self._guarded())
        self.calls = 0
        self.introspection = guards.IntrospectionWatch()
        self.introspection.install()
        self.previous_outputs: list[Any] = []  # the last correctness call's outputs (output-fresh)
        self.batch_bufs: tuple[str, list] | None = None   # (role, one input set per call) for op_batch
        self.batch_outs: list | None = None  # every call's output of the last batch, for fetch
        # (CUDAGraph, {"key": (role, dims, n), "n", "bufs": its inputs, "outs": every call's output}) for op_batch
        self.batch_graph: Any = None
        self.batch_kept: dict | None = None  # {"key", "bufs"}: an eager batch's inputs, refilled like a graph's

    def _warm_up(self) -> None:
        """Start torch's own thread pools and CUDA context before counting threads."""
        torch = self.torch
        x = torch.randn(64, 64, device=self.device)
        (x @ x).softmax(-1).sum().item()
        if self.on_gpu:
            torch.cuda.synchronize()

    # -- helpers -----------------------------------------------------------------------------
    def inputs(self, dims: dict, seed: int) -> list[Any]:
        # Made on the device the parent makes its copy on (same seed, same generator): bit-identical.
        xs = self.make_inputs(dims, self.dtype, seed, self.device)
        xs = list(xs) if isinstance(xs, (tuple, list)) else [xs]
        return [x.to(self.device) if isinstance(x, self.torch.Tensor) else x for x in xs]

    def _guarded(self) -> dict[str, Any]:
        """The task's and Triton's functions a candidate must not replace (beyond torch's own)."""
        fns = {"reference.make_inputs": self.ref.make_inputs, "reference.reference": self.ref.reference,
               "reference.compare": getattr(self.ref, "compare", None),
               "reference.fill_inputs": getattr(self.ref, "fill_inputs", None),
               "contract.apply": self.contract_inputs,
               "triton.JITFunction.run": __import__("triton").runtime.jit.JITFunction.run,
               # the watch's settings: the frozen copy, and the module names it was made from
               "guards.watch_settings (frozen)": self.watch_settings,
               "guards.TORCH_NONCOMPUTE_OPS": guards.TORCH_NONCOMPUTE_OPS,
               "guards.TORCH_TO_PYTHON": guards.TORCH_TO_PYTHON,
               "guards.PYTHON_VALUES_LIMIT": guards.PYTHON_VALUES_LIMIT}
        if self.dsl == "cute":
            # cutlass (~2 s) only for a CuTe task
            from cutlass.base_dsl.jit_executor import JitCompiledFunction, JitExecutor

            fns["cutlass.JitExecutor.run_compiled_program"] = JitExecutor.run_compiled_program
            fns["cutlass.JitCompiledFunction.run_compiled_program"] = JitCompiledFunction.run_compiled_program
        return fns

    def patched(self) -> list[str]:
        now = guards.identity_snapshot(self._guarded())
        # Methods replaced on the harness's own instances (an identity snapshot of classes misses them).
        shadowed = [f"{type(o).__name__}.{k} (instance)" for o in (self.ep, self, self.counter)
                    for k in guards.instance_overrides(o)]
        changed = ["guards.watch_settings (contents)"] if self.watch_settings.digest() != self.watch_digest else []
        return guards.changed_identities(self.snapshot, now) + shadowed + changed

    def introspected(self) -> list[dict]:
        seen = self.introspection.take()
        if not seen:
            return []
        return [{"rule": "no-introspection", "message": "candidate code reached into the running program: "
                 + ", ".join(seen[:8]) + (f" (+{len(seen) - 8} more)" if len(seen) > 8 else "")}]

    def sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize()

    # -- operations ------------------------------------------------------------------------------
    def op_import(self, req: dict) -> tuple[dict, list]:
        role, path = req["role"], req["path"]
        self.introspection.watch_file(path)
        threads_before = guards.live_threads()
        try:
            # The bytes the parent's static stage read (sha256), compiled as UTF-8: what was checked runs.
            mod = load_module(Path(path), f"warpsmith_{role}", req.get("sha256"))
        except BaseException as e:  # noqa: BLE001 - SystemExit from candidate code too
            return error_reply("import-error", e), []
        fn = getattr(mod, self.job["entry"], None)
        if not callable(fn):
            return {"ok": False, "kind": "import-error",
                    "error": f"{path} defines no callable {self.job['entry']!r} (the task's entry)"}, []
        self.modules[role], self.entries[role] = mod, fn
        patched = self.patched()
        observed = self.introspected()
        # A thread started at import outlives every call, so the per-call thread count never sees it.
        new_threads = guards.live_threads() - threads_before
        if new_threads:
            observed.append({"rule": "no-threads", "message": f"importing {Path(path).name} left "
                             f"{len(new_threads)} Python thread(s) running"})
        return {"ok": True, "patched": patched, "observed": observed,
                "watch_settings": self.watch_settings.digest()}, []

    def op_call(self, req: dict) -> tuple[dict, list]:
        """One call of an entry on fresh inputs; send back outputs and what the guards saw."""
        torch = self.torch
        role = req["role"]
        fn = self.entries[role]
        xs = self.contract_inputs(self.inputs(req["dims"], int(req["seed"])), req.get("contract"), int(req["seed"]))
        # A view's whole storage is watched: a write past the view (into a wider tensor's other columns)
        # changes a caller's data as much as one inside it.
        watched = [x._base if isinstance(x, torch.Tensor) and x._base is not None else x for x in xs]
        saved = [x.clone() if isinstance(x, torch.Tensor) else x for x in watched]
        threads_before = guards.live_threads()
        if req.get("fill"):
            guards.fill_allocator(req["fill"], int(req.get("out_nbytes", 0)), self.device, self.dtype)
        self.counter.reset()
        self.counter.ghost = bool(req.get("ghost"))
        observed: list[dict] = []
        watch = guards.TorchComputeWatch(self.watch_settings)
        self.sync()
        try:
            if req.get("graph"):
                out = self.timing.graph_call(fn, xs, self.inputs(req["dims"], int(req["graph_seed"])))
            else:
                # Correctness calls only: the watch costs host time, so timed calls run without it.
                with watch:
                    out = fn(*xs)
            stream_note = self._stream_check(out) if (self.on_gpu and not req.get("graph")) else None
            self.sync()
        except BaseException as e:  # noqa: BLE001
            self.counter.ghost = False
            return error_reply("crashed", e), []
        finally:
            self.counter.ghost = False
        self.calls += 1
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if stream_note:
            observed.append({"rule": "no-side-streams", "message": stream_note})
        if not req.get("graph"):
            for msg in watch.findings():
                observed.append({"rule": "torch-compute", "message": msg})
            for rule, msg in guards.check_outputs(outs, xs, self.device, type(out)):
                observed.append({"rule": rule, "message": msg})
            # An output sharing storage with the previous call's output (held alive here, so the
            # allocator can't have handed the memory out again) is a buffer kept across calls:
            # a caller still holding the earlier result would see it overwritten.
            kept = [i for i, o in enumerate(outs) if type(o) is torch.Tensor and o.numel() and any(
                p.numel() and guards.overlaps(o, p) for p in self.previous_outputs)]
            if kept:
                observed.append({"rule": "output-fresh", "message": f"output(s) {kept} share storage with the "
                                 "previous call's output: allocate a new output in every call"})
            self.previous_outputs = [o for o in outs if type(o) is torch.Tensor]
            changed = guards.inputs_unchanged(watched, saved)
            if changed:
                observed.append({"rule": "inputs-unmodified",
                                 "message": f"the call modified input(s) {changed}; inputs are read-only"})
        new_threads = guards.live_threads() - threads_before
        if new_threads:
            observed.append({"rule": "no-threads",
                             "message": f"{len(new_threads)} Python thread(s) still running after the call"})
        # OS threads: the first candidate call may legitimately start pools (Triton, OpenMP).
        # After that, growth is a thread left behind; on GPUs the driver starts its own helper
        # threads at first use of some features (graphs, events), so there it is only noted.
        notes: list[str] = []
        native = guards.native_thread_count()
        if self.calls <= 1:
            self.native_threads = max(self.native_threads, native)
        elif native > self.native_threads:
            msg = f"{native - self.native_threads} more OS thread(s) running than after the first call"
            if self.on_gpu:
                notes.append(msg)
                self.native_threads = native
            else:
                observed.append({"rule": "no-threads", "message": msg})
        patched = self.patched()
        if patched:
            observed.append({"rule": "harness-patched",
                             "message": "the call replaced functions the harness relies on: " + ", ".join(patched[:8])})
        observed += self.introspected()
        plain = [o for o in outs if type(o) is torch.Tensor]
        send = self._rows(req, [o.detach() for o in plain] if len(plain) == len(outs) else [])
        return {"ok": True, "observed": observed, "notes": notes, "launches": self.counter.launches,
                "driver_launches": self.counter.driver_launches, "hook": self.counter.hook_installed,
                "kernels": sorted(self.counter.kernels), "n_out": len(outs),
                "current_stream_default": self._on_default_stream()}, send

    def _on_default_stream(self) -> bool:
        if not self.on_gpu:
            return True
        torch = self.torch
        return torch.cuda.current_stream() == torch.cuda.default_stream()

    def _stream_check(self, out: Any) -> str | None:
        """Work still running on another stream when the call returned shows up as an output
        that changes between 'the current stream is done' and 'every stream is done'."""
        torch = self.torch
        outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if type(o) is torch.Tensor]
        if torch.cuda.current_stream() != torch.cuda.default_stream():
            return "the call returned with a non-default stream current"
        ev = torch.cuda.Event()
        ev.record()
        ev.synchronize()
        early = [o.clone() for o in outs]  # on the current stream, after only its own work
        ev2 = torch.cuda.Event()
        ev2.record()
        ev2.synchronize()
        torch.cuda.synchronize()
        for a, b in zip(early, outs):
            if not guards.inputs_unchanged([b], [a]) == []:
                return ("the output changed after the call's stream finished: work ran on a side stream "
                        "and was not joined to the caller's stream")
        return None

    def op_time(self, req: dict) -> tuple[dict, list]:
        self.previous_outputs = []  # don't hold a correctness output's memory through timing
        if not self.on_gpu:
            return {"ok": False, "kind": "no-gpu", "error": "timing needs a CUDA GPU"}, []
        try:
            res = self.timing.time_shape(self, req)
        except BaseException as e:  # noqa: BLE001
            return error_reply("crashed", e), []
        patched = self.patched()
        if patched:
            res.setdefault("observed", []).append({
                "rule": "harness-patched",
                "message": "timing ran with replaced functions the harness relies on: " + ", ".join(patched[:8])})
        res.setdefault("observed", []).extend(self.introspected())
        return dict(res, ok=True), []

    # -- batches timed by the parent's clock (harness/evaluate/parent_clock.py) ------------------
    def op_prep(self, req: dict) -> tuple[dict, list]:
        """Fresh inputs for the next batch, one set per call (made from the parent's seeds: the
        parent can rebuild any of them), and `warmup` untimed calls. With "graph" the batch's calls
        are captured in one CUDA graph here, so the batch replays it: the figure is then the GPU's
        time, not Python's launch overhead (which hid GPU-side wins of 2x on the H200: 83 µs a call
        for a 10 µs kernel). Outside the timed window.

        The graph is captured once per (role, dims, n) and its inputs refilled in place after that
        (a softmax eval's prep on the H200: 6.4 s capturing every batch, 5.6 s so; making the fresh
        inputs is the rest). A replay on refilled inputs is what the correctness stage's capture check
        ("cuda-graph-capturable") already proved right for this kernel, and the outputs the parent
        checks are still of the fresh inputs. Every call's output is kept, so the parent names the
        checked call only after the batch: nothing in the child can know it while the batch runs.
        Eager batches (no graph: a CPU, or a task without graphs) keep and refill their inputs the same
        way: a kernel that caches by address meets the same buffers with fresh values either way."""
        self.previous_outputs = []
        self.batch_outs = None
        self.batch_bufs = None
        try:
            role, dims, seeds = req["role"], req["dims"], [int(x) for x in req["seeds"]]
            fn = self.entries[role]
            key = (role, json.dumps(dims, sort_keys=True, default=str), len(seeds))  # (dims may hold lists)
            use_graph = bool(req.get("graph") and self.on_gpu)
            kept = self.batch_graph[1] if (use_graph and self.batch_graph is not None) else \
                (self.batch_kept if not use_graph else None)
            # Seconds of each part, for the trace (harness/evaluate/trace.py): where a prep's time goes.
            parts: dict[str, float] = {}
            t0 = time.monotonic()
            if kept is not None and kept["key"] == key and self._refill(kept["bufs"], dims, seeds):
                bufs = kept["bufs"]
                self.sync()
                parts["refill"] = time.monotonic() - t0
            else:
                self._release_batch()  # (their memory back before the new inputs)
                bufs = [self.inputs(dims, s) for s in seeds]
                self.sync()
                parts["make"] = time.monotonic() - t0
                t0 = time.monotonic()
                for _ in range(int(req.get("warmup", 0))):
                    fn(*bufs[0])
                self.sync()
                parts["warmup"] = time.monotonic() - t0
                t0 = time.monotonic()
                if use_graph:
                    self.batch_graph = self._capture(fn, bufs, key)
                else:
                    self.batch_kept = {"key": key, "bufs": bufs}
                parts["capture"] = time.monotonic() - t0
            if self.on_gpu:
                # The GPU busy until the batch: idle through the prep's host work, the H200 drops its
                # SM clock (345 MHz idle against 1980), and a batch would start on the ramp. A
                # candidate that skips this in its own process only slows its own batches.
                t0 = time.monotonic()
                self.torch.cuda._sleep(2_000_000)
                self.sync()
                parts["sleep"] = time.monotonic() - t0
        except BaseException as e:  # noqa: BLE001
            reply = error_reply("crashed", e)  # (before the release: its traceback is this exception's)
            self._release_batch()
            return reply, []
        self.batch_bufs = (role, bufs)
        return {"ok": True, "graph": self.batch_graph is not None,
                "parts": {k: round(v, 4) for k, v in parts.items()}}, []

    def _release_batch(self) -> None:
        """Drop the kept batch (its graph, inputs and outputs) and hand the memory back to the driver:
        the allocator's cache of one shape's batch (GiBs for a DeepSeek V4 cache) is not the block sizes
        the next shape asks for, and kept cached across shapes a child reached 73 GiB on the H200 and
        ran out of memory beside the other child."""
        had = self.batch_graph is not None or self.batch_kept is not None or self.batch_bufs is not None
        self.batch_graph = self.batch_kept = None
        self.batch_bufs = None
        self.batch_outs = None
        if had and self.on_gpu:
            self.torch.cuda.empty_cache()

    def op_release(self, req: dict) -> tuple[dict, list]:
        """Free the kept batch between evaluations (a long-lived incumbent child: timing_stage)."""
        self.previous_outputs = []
        self._release_batch()
        return {"ok": True}, []

    def _refill(self, bufs: list, dims: dict, seeds: list[int]) -> bool:
        """The inputs of `seeds` in the kept input buffers (a captured graph's, or an eager batch's).
        A task's fill_inputs(xs, dims, seed) writes make_inputs's values in place (one kernel a tensor
        for softmax, where making a set and copying it made ~11x the memory traffic); otherwise each set
        is made and copied. False (nothing usable: capture again) when a made set differs in structure:
        a shape, dtype, stride or device, or a non-tensor argument, which the graph has baked in."""
        torch = self.torch
        fill = getattr(self.ref, "fill_inputs", None)

        def same(dst: Any, src: Any) -> bool:
            if isinstance(dst, torch.Tensor):
                return isinstance(src, torch.Tensor) and (dst.shape, dst.dtype, dst.stride(), dst.device) == \
                    (src.shape, src.dtype, src.stride(), src.device)
            if isinstance(dst, (list, tuple)):
                return type(dst) is type(src) and len(dst) == len(src) and all(map(same, dst, src))
            return type(dst) is type(src) and bool(dst == src)

        def copy(dst: Any, src: Any) -> None:
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
            elif isinstance(dst, (list, tuple)):
                for d, x in zip(dst, src):
                    copy(d, x)

        for b, seed in zip(bufs, seeds):
            if fill is not None and fill(b, dims, seed):
                continue
            new = self.inputs(dims, seed)
            if not same(b, new):
                return False
            copy(b, new)
            del new
        return True

    def _capture(self, fn: Any, bufs: list, key: tuple) -> tuple[Any, dict]:
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):  # one call off the capture (allocator, lazy init)
            fn(*bufs[0])
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        outs = []
        with torch.cuda.graph(g):
            for b in bufs:
                outs.append(fn(*b))  # each kept: any of them may be the one the parent checks
        return g, {"key": key, "n": len(bufs), "outs": outs, "bufs": bufs}

    def op_batch(self, req: dict) -> tuple[dict, list]:
        """n back-to-back calls on the prepared inputs (a replay of the captured graph when prep made
        one), then a device-wide sync. The parent's clock around this request is what decides; the
        CUDA events (host clock on CPU) here are only a cross-check. Every call's output is kept for
        `fetch` (which names the one the parent checks); no check runs in here."""
        n = int(req["n"])
        role, bufs = self.batch_bufs if self.batch_bufs else (req.get("role"), [])
        fn = self.entries.get(role) if n else None
        graph = self.batch_graph if (n and self.batch_bufs) else None
        if graph is not None and n != graph[1]["n"]:
            return {"ok": False, "kind": "protocol", "error": f"batch of {n} calls, {graph[1]['n']} captured"}, []
        outs: list = []
        try:
            self.sync()
            if self.on_gpu:
                start, end = self.torch.cuda.Event(enable_timing=True), self.torch.cuda.Event(enable_timing=True)
                start.record()
            t0 = time.perf_counter()
            if graph is not None:
                graph[0].replay()
                outs = graph[1]["outs"]
            else:
                for i in range(n):
                    outs.append(fn(*bufs[i % len(bufs)]))
            if self.on_gpu:
                # Recorded before the host waits: after it, the figure held the sync's wake-up and this
                # launch (on the H200 a 30 µs call read 65-95 µs alone, and batches were sized 3x short).
                end.record()
            self.sync()
            child_us = (time.perf_counter() - t0) * 1e6
            event_us = None
            if self.on_gpu:
                end.synchronize()
                event_us = start.elapsed_time(end) * 1e3
        except BaseException as e:  # noqa: BLE001
            return error_reply("crashed", e), []
        self.batch_outs = outs
        first = (list(outs[0]) if isinstance(outs[0], (tuple, list)) else [outs[0]]) if outs else []
        out_bytes = sum(o.numel() * o.element_size() for o in first if isinstance(o, self.torch.Tensor))
        return {"ok": True, "n": n, "event_us": event_us, "child_us": child_us, "out_bytes": out_bytes}, []

    def op_fetch(self, req: dict) -> tuple[dict, list]:
        """The output of call `check` of the last batch (named by the parent after the batch), as
        bytes for the parent to compare, and what the guards saw (outside the timed window: an
        identity snapshot takes milliseconds). Without `check`, only what the guards saw."""
        outs, self.batch_outs = self.batch_outs or [], None
        j = req.get("check")
        out = outs[int(j)] if (j is not None and 0 <= int(j) < len(outs)) else None
        del outs
        outs = list(out) if isinstance(out, (tuple, list)) else ([] if out is None else [out])
        plain = [o for o in outs if type(o) is self.torch.Tensor]
        observed = []
        patched = self.patched()
        if patched:
            observed.append({"rule": "harness-patched", "message": "timed batches ran with replaced functions the "
                                                                   "harness relies on: " + ", ".join(patched[:8])})
        observed += self.introspected()
        send = self._rows(req, [o.detach() for o in plain] if len(plain) == len(outs) else [])
        return {"ok": True, "n_out": len(outs), "observed": observed}, send

    def _rows(self, req: dict, send: list) -> list:
        """Large outputs as the rows the parent will check (channel.rows_to_check), when it names a seed."""
        if req.get("rows_seed") is None:
            return send
        out = []
        for i, o in enumerate(send):
            rows = rows_to_check(int(req["rows_seed"]), i, tuple(o.shape), o.numel() * o.element_size(),
                                 req.get("rows_min_bytes"))
            out.append(o if rows is None else o.index_select(0, self.torch.tensor(rows, device=o.device)))
        return out

    def op_mem(self, req: dict) -> tuple[dict, list]:
        """Free GPU memory: the parent sizes its batches from the incumbent's child (not the candidate's).
        The allocator's cache is handed back first: what the correctness stage's shapes left cached
        is free for the batches, and the driver's figure would not count it."""
        if not self.on_gpu:
            return {"ok": True, "free": None}, []
        self.torch.cuda.empty_cache()
        return {"ok": True, "free": int(self.torch.cuda.mem_get_info()[0])}, []

    def op_device(self, req: dict) -> tuple[dict, list]:
        if not self.on_gpu:
            return {"ok": True, "name": "cpu (Triton interpreter)"}, []
        return dict(self.timing.device_info(self.torch), ok=True), []


def interpreter_autotune() -> None:
    """Let @triton.autotune kernels run in the interpreter: with several configs Triton asks the
    GPU driver for a benchmarker ("0 active drivers"), which rejected honest autotuned candidates
    on CPU as crashed. Here each config runs once (so each is exercised) and all tie: the first
    config wins, as it would with one config."""
    from triton.runtime.autotuner import Autotuner  # (triton: loaded in preload, after the child's start)

    def bench(kernel_call: Any, quantiles: Any = None) -> Any:
        kernel_call()
        return [0.0] * len(quantiles) if quantiles else 0.0

    Autotuner.do_bench = property(lambda self: self._do_bench or bench)  # type: ignore[method-assign,assignment]


def error_reply(kind: str, e: BaseException) -> dict:
    name = type(e).__name__
    msg = str(e)[:2000]
    low = msg.lower()
    if isinstance(e, SystemExit):
        kind_detail = "sys-exit"
    elif isinstance(e, MemoryError) or "out of memory" in low:
        kind_detail = "oom"
    elif "illegal memory access" in low or "cuda error" in low or "illegal address" in low:
        kind_detail = "cuda-error"
    else:
        kind_detail = "exception"
    tb = traceback.format_exc()
    return {"ok": False, "kind": kind, "detail": kind_detail, "error": f"{name}: {msg}",
            "traceback": tb[-TRACE_TAIL:]}


def preload(startup: dict[str, float]) -> None:
    """Import torch, triton and what the torch-compute watch pulls in, and on a GPU create the CUDA
    context and cuBLAS (harness code only: no task or candidate is known yet). A pre-warmed spare
    (harness/evaluate/prewarm.py) does all of this before it is needed. torch._dynamo is not loaded
    (guards.wrap_manual_seed_as_dynamo_does says why that is safe)."""
    import torch  # this function's point: the imports, timed as a start-up phase
    import triton  # noqa: F401

    from harness.evaluate import timing  # noqa: F401  (timed start-up phase, like torch)

    guards.wrap_manual_seed_as_dynamo_does()

    with guards.TorchComputeWatch():
        torch.empty(1) + 1
    # The parent hides the GPU from an interpreter child (CUDA_VISIBLE_DEVICES="", TRITON_INTERPRET=1).
    if "TRITON_INTERPRET" not in os.environ and os.environ.get("CUDA_VISIBLE_DEVICES") != "":
        t0 = time.monotonic()
        try:
            if torch.cuda.is_available():
                x = torch.randn(64, 64, device="cuda")  # (Child._warm_up's work, on the spare's time)
                (x @ x).softmax(-1).sum().item()
                torch.cuda.synchronize()
        except Exception:  # noqa: BLE001 - Child() meets the same error and reports it as a setup failure
            pass
        startup["cuda_init"] = time.monotonic() - t0


def main(argv: list[str]) -> int:
    main_at = time.time()  # (wall clock: the parent compares it with when it started the sandbox)
    rfd, wfd = int(argv[1]), int(argv[2])
    key = bytes(_read_exact(rfd, 32))
    # Candidate code may start processes; they must not inherit the channel.
    os.set_inheritable(rfd, False)
    os.set_inheritable(wfd, False)
    sock = None
    if len(argv) > 3:  # the socket large outputs travel over, as sealed memfds
        import socket

        sock = socket.socket(fileno=int(argv[3]))
        sock.set_inheritable(False)
    ep = Endpoint(rfd, wfd, key, sock=sock)
    del key
    # The slow part of a start (imports; on a GPU the CUDA context), before the job arrives: a
    # pre-warmed spare (harness/evaluate/prewarm.py) does it while earlier evaluations run.
    t0 = time.monotonic()
    early: dict[str, float] = {"main_at": main_at}
    preload(early)
    early["preload"] = time.monotonic() - t0
    job, _ = ep.recv()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if job.get("rlimit_as"):
        lim = int(job["rlimit_as"])
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
    from harness.interp import patch_bf16_dot  # light; only after preload, like the rest of the child's order

    patch_bf16_dot()  # before the identity snapshot, so the fix is part of what is guarded
    if not job.get("on_gpu"):
        interpreter_autotune()
    t0 = time.monotonic()
    startup: dict[str, float] = dict(early)  # where a child's start-up time goes
    try:
        child = Child(ep, job, startup)
    except BaseException as e:  # noqa: BLE001 - a broken task or torch install, not the candidate
        ep.send(error_reply("setup", e))
        return 3
    startup["total_in_child"] = time.monotonic() - t0
    Endpoint.send(ep, {"ok": True, "pid": os.getpid(), "startup_s": {k: (v if k == "main_at" else round(v, 3))
                                                                      for k, v in startup.items()}})
    ops = {"import": child.op_import, "call": child.op_call, "time": child.op_time, "device": child.op_device,
           "prep": child.op_prep, "batch": child.op_batch, "fetch": child.op_fetch,
           "mem": child.op_mem, "release": child.op_release}
    while True:
        req, _ = Endpoint.recv(ep)  # (through the class, like send)
        op = req.get("op")
        if op == "bye":
            ep.send({"ok": True})
            break
        t0 = time.monotonic()
        reply, tensors = ops[op](req)
        reply["child_s"] = round(time.monotonic() - t0, 4)
        # Through the class: a `send` candidate code put on the instance must not see the reply.
        Endpoint.send(ep, reply, tensors)
    sys.stdout.flush()
    sys.stderr.flush()
    # Skip interpreter teardown: a candidate's atexit handlers or stuck threads must not turn a
    # finished evaluation into a timeout.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))

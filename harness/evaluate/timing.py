"""GPU timing inside the child. Importable without CUDA (nothing runs at import).

One sample of one entry:
    refresh the input buffer with the next value set  (values change every time a buffer is reused,
                                                       so caches keyed on pointers return stale data)
    flush L2 (write a buffer >= 2x L2)
    a GPU spin (~1.5x the call's host overhead)        (the host enqueues the call meanwhile, so the
                                                        events hold GPU time, not Python launch time)
    start event; call; end event on the call's stream; synchronize ALL streams; second end event
                                                       (work left on other streams shows as a gap)
    host wall clock around the same window             (a patched or fooled event timer disagrees)
    check the output against the expected values      (timed calls are checked too)
Incumbent and candidate alternate in random pair order (AB or BA) in the same window, after
warm-up calls that are not counted. A constant overhead (the sync-and-record of an empty
sample) is measured the same way and subtracted.
"""
from __future__ import annotations

import random
import statistics
import time
from typing import Any

# Dense bf16 tensor-core peaks (TFLOP/s) by device name, for the flops floor. Sources: NVIDIA
# H100/H200 datasheets (989 dense bf16 for SXM). Unknown devices get no flops floor.
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "B200": 2250.0}


def device_info(torch: Any) -> dict:
    props = torch.cuda.get_device_properties(0)
    l2 = int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)
    from harness.profiling.measure import copy_bandwidth_Bps  # (light; bound here like the module's other imports)

    bw = copy_bandwidth_Bps()  # device-to-device copy of 1 GiB, median of 10, bytes read + written
    peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in props.name), None)
    return {"name": props.name, "l2_bytes": l2, "sms": props.multi_processor_count,
            "copy_bw_Bps": bw, "peak_tflops": peak, "torch": torch.__version__,
            "triton": __import__("triton").__version__}


def graph_call(fn: Any, xs: list[Any], new_xs: list[Any]) -> Any:
    """Capture `fn(*xs)` in a CUDA graph, copy new inputs into the captured buffers, replay once
    and return the captured outputs (now holding the replay's result)."""
    import torch  # (in functions, like the rest of the child's modules: torch's import is a timed start-up phase)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up off the capture (compiles, autotunes, allocates)
        for _ in range(2):
            fn(*xs)
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(*xs)
    for x, nx in zip(xs, new_xs):
        if isinstance(x, torch.Tensor):
            x.copy_(nx)
    g.replay()
    torch.cuda.synchronize()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    res = tuple(o.clone() if isinstance(o, torch.Tensor) else o for o in outs)
    return res if isinstance(out, (tuple, list)) else res[0]


def _close(torch: Any, out: Any, exp: Any, atol: float, rtol: float) -> bool:
    outs = out if isinstance(out, (tuple, list)) else (out,)
    exps = exp if isinstance(exp, (tuple, list)) else (exp,)
    if len(outs) != len(exps):
        return False
    for o, e in zip(outs, exps):
        if type(o) is not torch.Tensor or o.shape != e.shape or o.dtype != e.dtype:
            return False
        of, ef = o.float(), e.float()
        if not bool(torch.isfinite(of).all()):
            return False
        if bool(((of - ef).abs() > atol + rtol * ef.abs()).any()):
            return False
    return True


def time_shape(child: Any, req: dict) -> dict:
    """Interleaved timing of req['roles'] on one shape; returns raw samples for verdict.py."""
    import torch  # (as above)

    dims, roles = req["dims"], list(req["roles"])
    seeds = [int(s) for s in req["seeds"]]
    samples, warmup = int(req.get("samples", 40)), int(req.get("warmup", 5))
    atol, rtol = float(req["atol"]), float(req["rtol"])
    l2 = int(req.get("l2_bytes") or 50 * 2**20)
    rng = random.Random(int(req.get("order_seed", 0)))

    # Value sources (n + 1) rotate through buffers (n): a buffer never sees the same values twice
    # in a row. n is chosen by the parent so the buffers together exceed L2.
    key = (repr(sorted(dims.items())), tuple(seeds))
    cached = getattr(child, "timing_sources", None)
    if req.get("keep_sources") and cached is not None and cached[0] == key:  # benchmarks: same seeds again
        sources, expected = cached[1], cached[2]
    else:
        child.timing_sources = None
        sources = [child.inputs(dims, s) for s in seeds]
        expected = []
        for src in sources:  # the reference, captured before any candidate import, on its own copy
            expected.append(child.reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in src]))
        if req.get("keep_sources"):
            child.timing_sources = (key, sources, expected)
    n_buf = max(1, len(sources) - 1)
    buffers = [[x.clone() if isinstance(x, torch.Tensor) else x for x in src] for src in sources[:n_buf]]
    flush = torch.empty(max(2 * l2, 64 * 2**20), dtype=torch.uint8, device="cuda")
    torch.cuda.synchronize()

    # A task whose outputs aren't compared elementwise (top-k indices: ties) checks its timed
    # outputs with its own compare, as the parent does during the correctness stage.
    custom = getattr(getattr(child, "ref", None), "compare", None)

    def correct(out: Any, src: int) -> bool:
        if not callable(custom):
            return _close(torch, out, expected[src], atol, rtol)
        try:
            return custom(out, expected[src], tuple(sources[src]), atol, rtol) is None
        except Exception:  # noqa: BLE001 - an output the task's compare can't even read is wrong
            return False

    def refresh(buf: list, src: list) -> None:
        for b, s in zip(buf, src):
            if isinstance(b, torch.Tensor):
                b.copy_(s)

    spin_fn = getattr(torch.cuda, "_sleep", None)  # a GPU busy-wait kernel, in torch since 1.x
    cycles = {"n": 0}

    def spin() -> None:
        if spin_fn is not None and cycles["n"] > 0:
            spin_fn(int(cycles["n"]))

    def one(fn: Any, k: int) -> tuple[float, float, float, float, bool]:
        """(events to the call's own stream, events to all streams, host wall, host enqueue, ok)."""
        b, src = k % n_buf, k % len(sources)
        refresh(buffers[b], sources[src])
        flush.zero_()
        # Keep the GPU busy while the host enqueues the call: the host's launch overhead then
        # stays out of the events (the GPU never waits on Python), and clocks stay up.
        spin()
        start, end, end_all = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        t0 = time.perf_counter()
        out = fn(*buffers[b]) if fn is not None else None
        t_host = time.perf_counter() - t0
        end.record()
        torch.cuda.synchronize()  # every stream, before the second end event
        end_all.record()
        end_all.synchronize()
        t1 = time.perf_counter()
        ok = True if fn is None else correct(out, src)
        del out
        return (start.elapsed_time(end) * 1e3, start.elapsed_time(end_all) * 1e3, (t1 - t0) * 1e6, t_host * 1e6,
                ok)

    # Spin rate (cycles per µs) at working clocks: spin twice, measure the second.
    rate = 1000.0
    if spin_fn is not None:
        for _ in range(2):
            a, z = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            spin_fn(1_000_000)
            z.record()
            z.synchronize()
            rate = 1_000_000 / max(a.elapsed_time(z) * 1e3, 1.0)
    cycles["n"] = int(rate * 200)

    res: dict[str, dict] = {r: {"event_us": [], "event_all_us": [], "wall_us": [], "bad": 0, "checked": 0}
                            for r in roles}
    host: dict[str, list[float]] = {r: [] for r in roles}
    k = 0
    for i in range(warmup):  # compiles, autotunes, warms caches and clocks; also measures host overhead
        for r in roles:
            *_, h, ok = one(child.entries[r], k)
            k += 1
            res[r]["checked"] += 1
            res[r]["bad"] += 0 if ok else 1
            if i > 0:
                host[r].append(h)
    host_us = max((statistics.median(v) for v in host.values() if v), default=100.0)
    spin_us = min(max(1.5 * host_us, 50.0), 3000.0)
    cycles["n"] = int(rate * spin_us)

    # Constant overheads of a sample with nothing in it (event records, sync latency, the spin).
    empty = [one(None, k) for k in range(20)]
    over_ev = statistics.median(e[0] for e in empty[5:])
    over_all = statistics.median(e[1] for e in empty[5:])
    over_wall = statistics.median(e[2] for e in empty[5:])
    fl_s, fl_e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fl_s.record()
    flush.zero_()
    fl_e.record()
    fl_e.synchronize()
    flush_us = fl_s.elapsed_time(fl_e) * 1e3

    for i in range(samples):
        order = roles[:]
        rng.shuffle(order)
        for r in order:
            ev, ev_all, wall, _h, ok = one(child.entries[r], k)
            k += 1
            res[r]["checked"] += 1
            res[r]["bad"] += 0 if ok else 1
            res[r]["event_us"].append(max(ev - over_ev, 0.0))
            res[r]["event_all_us"].append(max(ev_all - over_all, 0.0))
            res[r]["wall_us"].append(max(wall - over_wall, 0.0))

    if req.get("graph"):
        for r in roles:
            res[r]["graph_us"], res[r]["graph_error"] = _graph_times(torch, child.entries[r], buffers[0], sources,
                                                                    correct, flush, samples, res[r], spin)
    del buffers, sources, expected, flush
    if not req.get("keep_sources"):
        torch.cuda.empty_cache()
    return {"roles": res, "overhead_event_us": over_ev, "overhead_event_all_us": over_all,
            "overhead_wall_us": over_wall, "flush_us": flush_us, "spin_us": spin_us, "host_us": host_us,
            "n_buffers": n_buf, "observed": []}


def _graph_times(torch: Any, fn: Any, buf: list, sources: list, correct: Any, flush: Any, samples: int,
                 acc: dict, spin: Any) -> tuple[list[float], str | None]:
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn(*buf)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = fn(*buf)
    except Exception as e:  # noqa: BLE001 - reported, the correctness stage already ruled on it
        torch.cuda.synchronize()
        return [], f"{type(e).__name__}: {str(e)[:300]}"
    times = []
    for k in range(samples + 3):
        src = k % len(sources)
        for b, x in zip(buf, sources[src]):
            if isinstance(b, torch.Tensor):
                b.copy_(x)
        flush.zero_()
        spin()
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        st.record()
        g.replay()
        en.record()
        torch.cuda.synchronize()
        acc["checked"] += 1
        if not correct(out, src):
            acc["bad"] += 1
        if k >= 3:
            times.append(st.elapsed_time(en) * 1e3)
    del g
    return times, None

"""GPU measuring shared by the evaluator and the bench scripts: copy bandwidth, an L2 flush, a CUDA
graph captured after a warm-up, the per-call time of graph replays, and do_bench's median in the same
unit (issue 39: these were written three times, in two units). One unit here: bytes per second,
microseconds a call.

torch is imported in each function: the sandboxed child imports this module before its timed start-up
phases, and the CLI loads modules that import it at start.
"""
from __future__ import annotations

import statistics
from typing import Any, Callable

COPY_BYTES = 1 << 30   # 1 GiB each way: far beyond any L2 (the H200's is 60 MiB)
FLUSH_BYTES = 256 << 20  # written between timed calls to push their inputs out of L2

_flush_buf: dict[str, Any] = {}


def copy_bandwidth_Bps(nbytes: int = COPY_BYTES, reps: int = 10, device: str = "cuda") -> float:
    """Device-to-device copy of `nbytes`, bytes read + written a second, the median of `reps` timed
    copies (CUDA events) after two untimed ones: what 100% of the roofline means in every figure."""
    import torch  # (start-up: the note above)

    a = torch.empty(nbytes, dtype=torch.uint8, device=device)
    b = torch.empty_like(a)
    a.fill_(1)
    times = []
    for _ in range(reps + 2):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    del a, b
    return 2 * nbytes / statistics.median(times[2:])


def l2_flush(device: str = "cuda") -> None:
    """Write FLUSH_BYTES (a buffer kept for the process), so what a timed call reads next comes from HBM."""
    import torch  # (start-up: the note above)

    buf = _flush_buf.get(device)
    if buf is None:
        buf = _flush_buf[device] = torch.empty(FLUSH_BYTES, dtype=torch.int8, device=device)
    buf.zero_()


def capture_graph(step: Callable[[], Any], warmup: int = 1) -> tuple[Any, Any]:
    """(graph, what `step` returned during the capture): `step` run `warmup` times on a side stream
    first, as torch.cuda.graph's documentation asks (Triton compiles and autotunes, allocators settle,
    outside the capture), then captured once. Raises what the capture raises."""
    import torch  # (start-up: the note above)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step()
    return g, out


def replay_us(g: Any, calls: int = 1, replays: int = 5) -> float:
    """Median per-call GPU time of `replays` replays of a graph holding `calls` calls (CUDA events),
    after one untimed replay."""
    import torch  # (start-up: the note above)

    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(times)


def graph_us(fn: Callable[[], Any] | None, calls: int = 20, flush: bool = False, replays: int = 5) -> float:
    """Per-call GPU time of `calls` calls of `fn` captured in one CUDA graph (median of `replays`
    replays). With flush, each call is preceded by an L2 flush (its own graph time: graph_us(None,
    flush=True), to subtract)."""
    import torch  # (start-up: the note above)

    def body() -> None:
        for _ in range(calls):
            if flush:
                l2_flush()
            if fn is not None:
                fn()

    if fn is not None:
        fn()  # compile, choose the configuration and allocate workspaces outside the capture
    l2_flush()
    torch.cuda.synchronize()
    g, _ = capture_graph(body, warmup=1)
    try:
        return replay_us(g, calls, replays)
    finally:
        del g


def do_bench_us(fn: Callable[[], Any], rep_ms: int = 25, warmup_ms: int | None = None) -> float:
    """triton.testing.do_bench's median, microseconds a call: CUDA events around Python calls with L2
    flushed before each, so a wrapper's host time counts where the GPU is faster than it. The warm-up
    defaults to a quarter of `rep_ms` (at least 5 ms)."""
    import triton.testing  # (start-up: the note above; triton imports torch)

    warmup = max(5, rep_ms // 4) if warmup_ms is None else warmup_ms
    return triton.testing.do_bench(fn, warmup=warmup, rep=rep_ms, return_mode="median") * 1e3

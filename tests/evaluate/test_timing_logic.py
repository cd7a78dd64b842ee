"""The GPU timing loop's logic, run on CPU with torch.cuda's clock and sync faked by the host clock.

It can't say anything about GPU numbers; it catches mistakes in the sampling loop (interleaving,
warm-up exclusion, overhead subtraction, timed-output checks, source reuse) before GPU time is spent.
"""
from __future__ import annotations

import time

import pytest
import torch

from harness.evaluate import timing


class FakeEvent:
    def __init__(self, enable_timing: bool = False):
        self.t = None

    def record(self, stream=None):
        self.t = time.perf_counter()

    def synchronize(self):
        pass

    def elapsed_time(self, end: "FakeEvent") -> float:
        return (end.t - self.t) * 1e3  # ms, like CUDA


@pytest.fixture
def fake_cuda(monkeypatch):
    real_empty = torch.empty

    def empty(*a, device=None, **k):
        return real_empty(*a, **k)

    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: None)
    monkeypatch.setattr(torch, "empty", empty)


class FakeChild:
    def __init__(self, entries):
        self.entries = entries

    def inputs(self, dims, seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(dims["rows"], dims["cols"], generator=g)]

    def reference(self, x):
        return torch.softmax(x, -1)


def test_interleaved_samples_and_timed_output_checks(fake_cuda):
    calls = {"slow": 0, "fast": 0, "cheat": 0}

    def slow(x):
        calls["slow"] += 1
        time.sleep(0.05)
        return torch.softmax(x, -1)

    def fast(x):
        calls["fast"] += 1
        return torch.softmax(x, -1)

    def cheat(x):  # right for 6 calls, then stale
        calls["cheat"] += 1
        return torch.softmax(x, -1) if calls["cheat"] <= 6 else torch.zeros_like(x)

    child = FakeChild({"slow": slow, "fast": fast, "cheat": cheat})
    req = {"dims": {"rows": 8, "cols": 64}, "roles": ["slow", "fast", "cheat"], "seeds": [1, 2, 3], "samples": 10,
           "warmup": 3, "atol": 1e-5, "rtol": 1e-5, "l2_bytes": 1 << 20, "order_seed": 7}
    r = timing.time_shape(child, req)
    assert set(r["roles"]) == {"slow", "fast", "cheat"} and r["n_buffers"] == 2
    for role in ("slow", "fast", "cheat"):
        d = r["roles"][role]
        assert len(d["event_us"]) == len(d["event_all_us"]) == len(d["wall_us"]) == 10  # warm-up excluded
        assert d["checked"] == 13 and calls[role] == 13
    assert r["roles"]["slow"]["bad"] == 0 and r["roles"]["fast"]["bad"] == 0
    assert r["roles"]["cheat"]["bad"] == 13 - 6  # every timed output is checked
    slow_us = sorted(r["roles"]["slow"]["event_us"])[5]
    fast_us = sorted(r["roles"]["fast"]["event_us"])[5]
    assert slow_us > 25_000 and fast_us < slow_us  # sleep() gives a floor; the host may be loaded


def test_sources_are_reused_only_when_asked(fake_cuda):
    made = []

    class Counting(FakeChild):
        def inputs(self, dims, seed):
            made.append(seed)
            return super().inputs(dims, seed)

    child = Counting({"a": lambda x: torch.softmax(x, -1)})
    req = {"dims": {"rows": 4, "cols": 16}, "roles": ["a"], "seeds": [1, 2, 3], "samples": 3, "warmup": 2,
           "atol": 1e-5, "rtol": 1e-5, "l2_bytes": 1 << 20}
    timing.time_shape(child, dict(req, keep_sources=True))
    timing.time_shape(child, dict(req, keep_sources=True))
    assert made == [1, 2, 3]
    timing.time_shape(child, req)
    assert made == [1, 2, 3, 1, 2, 3]

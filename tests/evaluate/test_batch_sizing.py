"""How the parent sizes a timed batch (harness/evaluate/parent_clock.py), on scripted children: the
batch is sized again from the first graph replays' GPU time (a single eager call's events hold its
launch: a 4 us kernel read ~45 us and its batches held a tenth of the target time), and a prep that
runs out of GPU memory halves the batch and starts the shape over instead of failing the candidate."""
from __future__ import annotations

import pytest

from harness.evaluate import parent_clock
from harness.evaluate.process import EvalOptions
from harness.authoring.tasks import load_task


class ScriptedChild:
    """Answers the parent's timing requests like a child whose kernel takes `gpu_us` a call on the GPU and
    whose single eager call reads `eager_us` (its launch included); preps above `max_calls` run out of memory."""

    def __init__(self, gpu_us: float, eager_us: float, max_calls: int = 10**9, set_s: float = 0.0):
        self.gpu_us, self.eager_us, self.max_calls, self.set_s = gpu_us, eager_us, max_calls, set_s
        self.preps: list[int] = []
        self.n = 0

    def request(self, req: dict, timeout):
        op = req["op"]
        if op == "prep":
            n = len(req["seeds"])
            self.preps.append(n)
            if n > self.max_calls:
                return {"ok": False, "kind": "crashed", "detail": "oom", "error": "OutOfMemoryError: CUDA out of memory"}, []
            refill = self.n == n  # (the same batch again: refilled in place, as the child does)
            self.n = n
            return {"ok": True, "graph": True, "parts": {"refill": n * self.set_s} if refill else {"make": 0.1}}, []
        if op == "batch":
            n = int(req["n"])
            if n == 0:
                return {"ok": True, "n": 0, "event_us": 0.0, "child_us": 0.0, "out_bytes": 0}, []
            ev = self.eager_us if n == 1 else self.gpu_us * n
            return {"ok": True, "n": n, "event_us": ev, "child_us": ev, "out_bytes": 1024}, []
        if op == "mem":
            return {"ok": True, "free": 80 * 2**30}, []
        if op == "fetch":
            return {"ok": True, "n_out": 1, "observed": []}, [object()]
        raise AssertionError(op)


@pytest.fixture(autouse=True)
def no_processes_to_freeze(monkeypatch):
    monkeypatch.setattr(parent_clock, "freeze", lambda child, stop, pids=None: [])


def measure(children):
    task = load_task("softmax")
    opts = EvalOptions(on_gpu=True, run_timeout_s=10, samples=3, warmup=0)
    return parent_clock.measure(children, task, None, task.shapes[0], opts, lambda *p: hash(p) & 0xFFFF,
                                lambda tensors, n_out, seed, **kw: None, in_bytes=1024, alone_batches=2)


def test_a_tiny_kernels_batch_is_sized_again_from_its_graph_replays():
    inc, cand = ScriptedChild(gpu_us=4.0, eager_us=45.0), ScriptedChild(gpu_us=4.0, eager_us=45.0)
    m = measure({"incumbent": inc, "candidate": cand})
    assert m["n"] == parent_clock.MAX_CALLS  # 4 ms of 4 us calls, capped at MAX_CALLS
    assert inc.preps[3] == 89  # first sized from the eager single call: 4000 / 45 us
    assert cand.preps and set(cand.preps) == {m["n"]}  # the candidate only ever sees the final size
    assert any("resized from 89" in n for n in m["notes"])


def test_a_batch_out_of_memory_is_halved_not_a_crash_of_the_candidate():
    inc, cand = ScriptedChild(gpu_us=100.0, eager_us=100.0), ScriptedChild(gpu_us=100.0, eager_us=100.0, max_calls=15)
    m = measure({"incumbent": inc, "candidate": cand})
    assert m["n"] == 10 and not m["roles"]["candidate"]["errors"]
    assert len(m["roles"]["candidate"]["per_call_us"]) == 3 == len(m["roles"]["incumbent"]["per_call_us"])
    assert any("ran out of GPU memory; halved to 20" in n for n in m["notes"]), m["notes"]


def test_what_runs_out_of_memory_even_at_one_call_is_the_kernels_failure():
    inc, cand = ScriptedChild(gpu_us=100.0, eager_us=100.0), ScriptedChild(gpu_us=100.0, eager_us=100.0, max_calls=0)
    m = measure({"incumbent": inc, "candidate": cand})
    assert m["roles"]["candidate"]["errors"] and "out of GPU memory" in m["roles"]["candidate"]["errors"][-1]


def test_a_batch_grows_only_while_refilling_its_inputs_stays_cheap():
    # DeepSeek V4 compress on the H200: ~4 us calls, 0.2-0.4 ms of host work to refill one input set
    inc = ScriptedChild(gpu_us=4.0, eager_us=45.0, set_s=0.0002)
    cand = ScriptedChild(gpu_us=4.0, eager_us=45.0, set_s=0.0002)
    m = measure({"incumbent": inc, "candidate": cand})
    assert m["n"] == int(parent_clock.PREP_MAX_S / 0.0002) == 250  # not MAX_CALLS (a 200 ms refill a batch)
    slow = ScriptedChild(gpu_us=4.0, eager_us=45.0, set_s=0.00038)
    m = measure({"incumbent": slow, "candidate": ScriptedChild(gpu_us=4.0, eager_us=45.0, set_s=0.00038)})
    assert m["n"] == 89  # a cap of 131 is not worth a new capture


class ContextChild(ScriptedChild):
    """A ScriptedChild sharing one GPU with the other: a request that finds the other child's context
    current pays the switch (what made the H200's candidate read ~1.3% fast against itself)."""

    def __init__(self, gpu: dict, log: list, name: str):
        super().__init__(gpu_us=30.0, eager_us=60.0)
        self.gpu, self.log, self.name = gpu, log, name

    def request(self, req: dict, timeout):
        if req["op"] in ("batch", "prep"):
            self.log.append((self.name, req["op"], int(req.get("n", -1)), self.gpu.get("current") != self.name))
            self.gpu["current"] = self.name
        return super().request(req, timeout)


def test_no_timed_batch_pays_the_switch_to_its_childs_gpu_context():
    gpu, log = {}, []
    m = measure({"incumbent": ContextChild(gpu, log, "incumbent"), "candidate": ContextChild(gpu, log, "candidate")})
    timed = [i for i, (_, op, n, _) in enumerate(log) if op == "batch" and n > 0]
    assert len(timed) >= 2 * 3 and m["roles"]["candidate"]["per_call_us"]
    for i in timed:
        who, _, _, switched = log[i]
        assert not switched, f"timed batch {i} of the {who} found the other child's context current"
        assert log[i - 1][:3] == (who, "batch", 0), "the untimed empty batch that makes the context current"

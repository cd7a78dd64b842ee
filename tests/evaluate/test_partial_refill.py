"""dsv4_csa_decode refills a timed batch's compressed cache only where a call reads it (the entries
its new indices name; reference.py FILL_READS_ONLY). The attacker's side of that saving, with real
children in Triton's interpreter and the parent's own clock and output check (parent_clock.measure):
a kernel that keys a private copy of the cache on entries no call reads (which that refill never
touches) serves stale entries exactly where the call reads, and the parent refuses its timed outputs;
the same kernel under a whole refill recomputes every call and gains nothing. An honest pair agrees."""
from __future__ import annotations

import importlib.util
import sys
import zlib
from pathlib import Path

import pytest
import torch

from harness.evaluate import parent_clock
from harness.evaluate.runner import ChildProcess, EvalOptions, _Run
from harness.evaluate.timing_stage import _output_checker
from harness.authoring.tasks import Shape, compare, load_task

CANDIDATES = Path(__file__).resolve().parents[1] / "redteam" / "candidates"
SHAPE = "long, split key axis"  # 96 of 250-1024 entries a sequence read: most of the cache is left as it was
# Eight sequences, 32 of 256-512 entries read: the cheat's fingerprint entry (one a sequence) is rewritten
# by a later refill now and then, and it then converts that set once more; with eight sequences some
# sequence's copy is stale in every refilled batch. Seeds from the shape and batch, not hash() (randomised
# per process): the same batches every run.
TIMED = Shape("eight sequences", {"batch": 8, "heads": 16, "topk": 32, "ctx": 2048, "min_ctx": 1024})


@pytest.fixture(scope="module")
def csa_children():
    """A candidate child per measurement; the incumbent's (the baseline alone, never beside candidate
    code) is started once for the module, as an evaluation keeps its incumbent child across shapes."""
    task = load_task("dsv4_csa_decode")
    opts = EvalOptions(on_gpu=False, spare_child=False, run_timeout_s=300)
    made: list[ChildProcess] = []
    incumbent: list[ChildProcess] = []

    def make(role: str, path: Path) -> ChildProcess:
        if role == "incumbent" and incumbent:
            assert path == task.baseline_path
            return incumbent[0]
        c = ChildProcess(task, False, opts)
        made.append(c)
        assert c.start(300).get("ok")
        r, _ = c.request({"op": "import", "role": role, "path": str(c.stage(path))}, 300)
        assert r.get("ok"), r
        if role == "incumbent":
            incumbent.append(c)
        return c

    yield task, opts, make
    for c in made:
        c.close()


def _measure(csa_children, candidate: Path):
    task, opts, make = csa_children
    shape = TIMED
    pair = {"incumbent": make("incumbent", task.baseline_path), "candidate": make("candidate", candidate)}
    ref = task.load_reference()
    m = parent_clock.measure(pair, task, ref, shape, opts, lambda *p: zlib.crc32(repr(p).encode()),
                             _output_checker(task, ref, shape), 1 << 20, samples=3, warmup=0,
                             alone_batches=1)  # (the incumbent's unchecked batches alone: one, not eight)
    run = _Run(task, task.baseline_path)
    parent_clock.judge(run, {"name": shape.name, "roofline_pct": None}, m, (None, ""), {}, None)
    return m, {r["rule"] for r in run.reasons}


def test_a_copy_keyed_on_unread_entries_serves_stale_reads_and_is_refused(csa_children):
    m, rules = _measure(csa_children, CANDIDATES / "dsv4_csa_stale_entries.py")
    cand, inc = m["roles"]["candidate"], m["roles"]["incumbent"]
    assert cand["checked"] >= 2 and cand["bad"] >= 1 and "timed-outputs-correct" in rules
    assert inc["bad"] == 0  # the baseline, under the same refill, is right


def test_an_honest_pair_agrees_under_the_rows_only_refill(csa_children):
    task = csa_children[0]
    m, rules = _measure(csa_children, task.baseline_path)
    assert all(r["bad"] == 0 and r["checked"] >= 2 for r in m["roles"].values())
    assert "timed-outputs-correct" not in rules and "crashed" not in rules


def test_the_same_kernel_under_a_whole_refill_recomputes_and_gains_nothing():
    """In one process (the timed batches' order: a set made, called, refilled, called): with every
    entry redrawn its fingerprint entry changes, it copies the whole cache again each call (its
    "saving" gone) and is right; with the rows-only refill its output is wrong."""
    task = load_task("dsv4_csa_decode")
    ref = task.load_reference()
    dims = next(s.dims for s in task.interpreter_shapes if s.name == SHAPE)
    sys.modules["warpsmith_task_reference"] = ref
    try:
        spec = importlib.util.spec_from_file_location("stale_entries", CANDIDATES / "dsv4_csa_stale_entries.py")
        cheat = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(cheat)
    finally:
        del sys.modules["warpsmith_task_reference"]
    for rows_only in (False, True):
        xs = list(ref.make_inputs(dims, torch.bfloat16, 1, "cpu"))
        cheat.dsv4_csa_decode(*xs)
        ref.build_inputs(dims, torch.bfloat16, 2, "cpu", out=xs, rows_only=rows_only)
        got = cheat.dsv4_csa_decode(*xs)
        want = ref.reference(*ref.make_inputs(dims, torch.bfloat16, 2, "cpu"))
        assert (compare(task, ref, got, want, tuple(xs), "bfloat16") is None) == (not rows_only)

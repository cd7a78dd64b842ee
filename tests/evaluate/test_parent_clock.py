"""Timing the candidate can't forge: the figures that decide come from the parent's clock, the
child's own figure is only a cross-check, timed outputs are compared in the parent from bytes,
and the incumbent runs in a child of its own. The judge on plain numbers, then the real batches
with two children in Triton's interpreter (CPU: the times mean nothing there, the plumbing and the
rejections do)."""
from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from harness.evaluate import parent_clock
from harness.evaluate import verdict as vd
from harness.evaluate.runner import ChildProcess, EvalOptions, _Run
from harness.evaluate.timing_stage import _output_checker
from harness.authoring.tasks import load_task

CANDIDATES = Path(__file__).resolve().parents[1] / "redteam" / "candidates"


def noisy(mu: float, n: int, sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [mu * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def _m(inc_per_call, cand_per_call, n=10, child_scale=(1.0, 1.0), bad=(0, 0), alone=None):
    def role(per_call, scale, bad):
        net = [x * n for x in per_call]
        return {"per_call_us": per_call, "net_us": net, "wall_us": [x + 80 for x in net],
                "child_us": [x * scale for x in net], "bad": bad, "checked": 10,
                "errors": ["output: 5 elements differ"] if bad else [], "observed": []}

    return {"roles": {"incumbent": role(inc_per_call, child_scale[0], bad[0]),
                      "candidate": role(cand_per_call, child_scale[1], bad[1])},
            "n": n, "overhead_us": 80.0, "incumbent_alone_us": alone}


@pytest.fixture
def judged():
    task = load_task("softmax")

    def judge(m, floor=(None, "")):
        run = _Run(task, task.baseline_path)
        entry = {"name": "s", "roofline_pct": None}
        parent_clock.judge(run, entry, m, floor, {"copy_bw_Bps": 4e12}, 4e8)
        return {r["rule"] for r in run.reasons}, entry

    return judge


def test_the_decision_is_the_parents_figure_whatever_the_child_reports(judged):
    inc, cand = noisy(120, 40, 0.01, 1), noisy(100, 40, 0.01, 2)
    rules, honest = judged(_m(inc, cand))
    assert rules == set() and honest["speedup"] == pytest.approx(1.2, rel=0.03) and honest["clock"] == "parent"
    # The candidate's child claims its batches took 40% less: the figures that decide are unchanged,
    # so the lie buys nothing; it reads as host overhead (what honest host-bound calls look like on
    # the H200), said in the shape's entry, not a rejection.
    rules, forged = judged(_m(inc, cand, child_scale=(1.0, 0.6)))
    assert "timer-disagrees" not in rules and forged["speedup"] == honest["speedup"]
    assert "host-bound" in forged["host_bound"]
    # A child that claims more GPU time than the parent's clock saw pass is lying: rejected.
    assert "timer-disagrees" in judged(_m(inc, cand, child_scale=(1.0, 1.5)))[0]
    # Small honest differences (sync latency, jitter) are not a disagreement.
    assert "timer-disagrees" not in judged(_m(inc, cand, child_scale=(0.97, 1.03)))[0]


def test_wrong_timed_outputs_slowed_incumbent_and_impossible_times_are_rejected(judged):
    inc, cand = noisy(120, 40, 0.01, 1), noisy(100, 40, 0.01, 2)
    assert "timed-outputs-correct" in judged(_m(inc, cand, bad=(0, 2)))[0]
    assert "incumbent-slowed" in judged(_m(inc, cand, alone=100.0))[0]
    assert "incumbent-slowed" not in judged(_m(inc, cand, alone=118.0))[0]
    # With the incumbent child's own GPU figures, those decide: host jitter in the parent's
    # figures (honest pairs showed +57% on the H200) is not a slowed incumbent.
    m = _m(inc, cand, alone=60.0)
    m["incumbent_alone_child_us"] = 118.0
    assert "incumbent-slowed" not in judged(m)[0]
    m["incumbent_alone_child_us"] = 90.0
    assert "incumbent-slowed" in judged(m)[0]
    assert "impossible-time" in judged(_m(inc, cand), floor=(150.0, "bytes / copy bandwidth"))[0]


def test_graphed_batches_show_the_gpu_time_less_the_incumbents_fixed_cost_a_batch(judged):
    """On the H200 a graphed batch's wall time carried 0.2-0.9 ms beyond its GPU time (no launches
    between calls: the replay's launch, the host's wake-up), 10-25% of a batch. Its median over the
    incumbent's batches (parent's figure less that child's own GPU time) comes off both roles: the GPU's
    time per call, shown beside the plain figure. What decides (speedup, roofline %, floor) is unchanged,
    and a candidate's child reporting less GPU time than it took changes nothing of it."""
    inc, cand = noisy(120, 40, 0.01, 1), noisy(100, 40, 0.01, 2)
    plain = judged(_m(inc, cand))[1]
    m = _m(inc, cand)
    m["graph"] = True
    for role, scale in (("incumbent", 1.0), ("candidate", 0.5)):
        d = m["roles"][role]
        d["child_us"] = [x * scale - 200.0 for x in d["net_us"]]  # 20 µs of each 10-call batch is not the GPU's
    rules, e = judged(m)
    assert "timer-disagrees" not in rules and "host_bound" not in e and e["batch_cost_us"] == pytest.approx(200.0)
    assert (e["speedup"], e["roofline_pct"], e["candidate_us"]) == (plain["speedup"], plain["roofline_pct"],
                                                                     plain["candidate_us"])
    assert e["candidate_graph_us"] == pytest.approx(vd.median(cand) - 20.0, rel=0.01)
    assert e["incumbent_graph_us"] == pytest.approx(vd.median(inc) - 20.0, rel=0.01)
    # Eager batches (launches between calls): no such figure, the host-bound note as before
    m["graph"] = False
    assert judged(m)[1].get("candidate_graph_us") is None


def test_batch_size_aims_at_a_few_milliseconds_within_memory():
    assert parent_clock.calls_per_batch(20.0, 32 * 2**20) == 200  # 4 ms of calls
    assert parent_clock.calls_per_batch(20.0, 256 * 2**20) == 64  # 16 GiB of inputs at most
    assert parent_clock.calls_per_batch(20.0, 256 * 2**20, max_bytes=4 * 2**30) == 16  # a quarter of free memory
    assert parent_clock.calls_per_batch(5000.0, 1024) == 1


@pytest.fixture(scope="module")
def children():
    """A candidate child per candidate file, in the interpreter; the incumbent's child (the baseline,
    never beside candidate code) is started once and serves every measurement of the module, as an
    evaluation's kept incumbent child serves each of its shapes and its re-measure (a child start is
    2-3 s of CPU)."""
    task = load_task("softmax")
    opts = EvalOptions(on_gpu=False, spare_child=False, run_timeout_s=120)
    made: list[ChildProcess] = []
    incumbent: list[ChildProcess] = []

    def make(role: str, path: Path) -> ChildProcess:
        if role == "incumbent" and incumbent:
            assert path == task.baseline_path
            return incumbent[0]
        c = ChildProcess(task, False, opts)
        made.append(c)
        assert c.start(120).get("ok")
        r, _ = c.request({"op": "import", "role": role, "path": str(c.stage(path))}, 120)
        assert r.get("ok"), r
        if role == "incumbent":
            incumbent.append(c)
        return c

    yield task, opts, make
    for c in made:
        c.close()


def _measure(children, candidate: str):
    task, opts, make = children
    shape = next(s for s in task.interpreter_shapes if s.name == "odd rows")
    pair = {"incumbent": make("incumbent", task.baseline_path), "candidate": make("candidate", CANDIDATES / candidate)}
    ref = task.load_reference()
    # One incumbent batch alone (not 8): the tests here are about the timed batches of both roles.
    m = parent_clock.measure(pair, task, ref, shape, opts, lambda *p: hash(("seed",) + p) & 0xFFFFFFF,
                             _output_checker(task, ref, shape), 1 << 20, samples=3, warmup=0, alone_batches=1)
    run = _Run(task, task.baseline_path)
    parent_clock.judge(run, {"name": shape.name, "roofline_pct": None}, m, (None, ""), {}, None)
    return m, {r["rule"] for r in run.reasons}


def test_real_batches_of_an_honest_pair_are_checked_in_the_parent_and_agree(children):
    m, rules = _measure(children, "_honest.py")
    cand = m["roles"]["candidate"]
    assert cand["checked"] >= 2 and cand["bad"] == 0 and len(cand["per_call_us"]) == 3
    assert "timed-outputs-correct" not in rules and "crashed" not in rules and "timer-disagrees" not in rules


def test_work_deferred_into_the_check_comes_back_wrong(children):
    # Correct under the correctness stage's watch, a copy in timed batches, its patched
    # Tensor.float never called: the bytes the parent compares are the copy.
    m, rules = _measure(children, "gpu_deferred_float.py")
    assert m["roles"]["candidate"]["bad"] >= 1 and "timed-outputs-correct" in rules


def test_figures_forged_inside_the_child_change_nothing_that_decides(children):
    m, rules = _measure(children, "gpu_forged_figures.py")
    cand = m["roles"]["candidate"]
    # The forged figure is the child's alone; the parent's per-call figures are its own clock's.
    assert all(c < n for c, n in zip(cand["child_us"], cand["net_us"]))
    assert "harness-patched" in rules  # the in-process hint fires; the parent's clock is what holds


def test_every_stage_sees_where_the_evaluation_runs_not_auto(monkeypatch):
    """The parent clock graphs its batches only when opts.on_gpu says so: left at None ("auto"),
    every real evaluation on the H200 timed eager, host-bound batches (5-7 calls of 157 µs for a
    30 µs kernel) while the A/A bench, which set it, timed graphs."""
    from harness.evaluate import runner

    seen = []
    real = runner._evaluate_in_child

    def spy(run, v, task, candidate, incumbent, shapes, on_gpu, opts, secret):
        seen.append((on_gpu, opts.on_gpu))
        return real(run, v, task, candidate, incumbent, shapes, on_gpu, opts, secret)

    monkeypatch.setattr(runner, "_evaluate_in_child", spy)
    task = load_task("softmax")
    # One shape and no held-out stage: on_gpu is resolved in evaluate(), before any stage runs.
    runner.evaluate(task, task.baseline_path, task.baseline_path,
                    EvalOptions(time=False, shapes=["short rows"], heldout=False))
    assert seen and all(o is not None and o == g for g, o in seen)


def _measure_tall(children, candidate: str, monkeypatch):
    """A 96-row shape (more rows than the 64 drawn) whose outputs count as large (SAMPLE_MIN lowered):
    the checked outputs come back as 64 rows drawn after the batch. Records the row counts the parent's
    check received. (96, not 200, rows and one incumbent batch alone: each call is one interpreted
    program a row.)"""
    from harness.evaluate import channel
    from harness.authoring.tasks import Shape

    monkeypatch.setattr(channel, "SAMPLE_MIN", 1)
    task, opts, make = children
    shape = Shape("tall", {"rows": 96, "cols": 96})
    assert shape.dims["rows"] > channel.SAMPLE_ROWS
    pair = {"incumbent": make("incumbent", task.baseline_path), "candidate": make("candidate", CANDIDATES / candidate)}
    ref = task.load_reference()
    inner, got = _output_checker(task, ref, shape), []

    def check(tensors, n_out, seed, **kw):
        got.append(tuple(tensors[0].shape))
        return inner(tensors, n_out, seed, **kw)

    m = parent_clock.measure(pair, task, ref, shape, opts, lambda *p: hash(("seed",) + p) & 0xFFFFFFF,
                             check, 1 << 20, samples=3, warmup=0, sample_rows=True, alone_batches=1)
    return m, got


def test_large_timed_outputs_come_back_as_rows_drawn_after_the_batch_and_check_clean(children, monkeypatch):
    m, got = _measure_tall(children, "_honest.py", monkeypatch)
    cand = m["roles"]["candidate"]
    assert cand["checked"] >= 2 and cand["bad"] == 0
    assert got and all(s == (channel_rows(), 96) for s in got)


def test_a_kernel_that_skips_rows_is_caught_by_the_sampled_rows(children, monkeypatch):
    m, _ = _measure_tall(children, "half_rows_stale.py", monkeypatch)
    cand = m["roles"]["candidate"]
    assert cand["checked"] >= 2 and cand["bad"] == cand["checked"]


def channel_rows() -> int:
    from harness.evaluate.channel import SAMPLE_ROWS

    return SAMPLE_ROWS


def test_the_rows_are_drawn_the_same_on_both_sides_and_only_for_large_outputs():
    from harness.evaluate.channel import SAMPLE_MIN, SAMPLE_ROWS, rows_to_check

    rows = rows_to_check(7, 0, (4096, 4096), 64 << 20)
    assert rows == rows_to_check(7, 0, (4096, 4096), 64 << 20) and len(set(rows)) == SAMPLE_ROWS
    assert rows != rows_to_check(8, 0, (4096, 4096), 64 << 20) and rows != rows_to_check(7, 1, (4096, 4096), 64 << 20)
    assert rows_to_check(7, 0, (4096, 4096), SAMPLE_MIN - 1) is None      # small: whole
    assert rows_to_check(7, 0, (SAMPLE_ROWS, 1 << 20), 1 << 30) is None    # few rows: whole
    assert rows_to_check(7, 0, (1 << 28,), 1 << 30) is None                # one dimension: whole


def test_a_kernel_that_skips_every_eighth_row_is_caught_by_the_sampled_rows(children, monkeypatch):
    """Spelled apart from half_rows_stale: a strided skip of 1/8 of the rows (12 of the 96), missed by
    one 64-row sample with probability C(84, 64) / C(96, 64) (~1e-7)."""
    m, got = _measure_tall(children, "strided_row_skip.py", monkeypatch)
    cand = m["roles"]["candidate"]
    assert got and all(s == (channel_rows(), 96) for s in got)
    assert cand["checked"] >= 2 and cand["bad"] >= cand["checked"] - 1


def test_a_cache_keyed_on_the_input_address_meets_the_same_buffers_with_fresh_values(children):
    """Batches keep their inputs and refill them in place (graphed or eager): a kernel that caches by
    address hits from the second batch on and serves the last batch's outputs, which the parent's
    check of the fresh inputs refuses (the batches checked always include the last)."""
    m, rules = _measure(children, "gpu_ptr_cache.py")
    cand = m["roles"]["candidate"]
    assert cand["bad"] >= 1 and "timed-outputs-correct" in rules


def test_a_refill_turned_into_a_no_op_is_named_and_its_stale_outputs_refused(children):
    m, rules = _measure(children, "fill_skip.py")
    assert m["roles"]["candidate"]["bad"] >= 1 and {"timed-outputs-correct", "harness-patched"} <= rules

"""The A/A of bench/timing_trust.py (harness/evaluate/timing_trust.py; issues 18 and 19: 0 false keeps,
0 rejections of the incumbent against itself on every task) counts what the evaluator's own rule decides,
not a copy of it: each trial goes through timing_stage.time_shape (every timing rejection rule) and
runner.timed_verdict (the summary, the recommendation and the keep policy). Here with real children in
Triton's interpreter, and with fabricated samples where the rule's corners need exact figures."""
from __future__ import annotations

import random
import zlib

import pytest

from harness.evaluate import timing_stage, timing_trust
from harness.evaluate.runner import ChildProcess, EvalOptions, _Run, timed_verdict
from harness.authoring.tasks import load_task

# The interpreter evaluates both sides of tl.where: exp(-inf - -inf) warns in numpy, is discarded.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def _samples(mu: float, spread: float, n: int = 40, seed: int = 0) -> list[float]:
    rng = random.Random(seed)
    return [mu * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


@pytest.fixture(scope="module")
def softmax():
    task = load_task("softmax")
    return task, task.shapes[0]


def test_the_same_figures_are_never_a_keep(softmax):
    task, shape = softmax
    same = _samples(100.0, 0.02, seed=1)
    d = timing_trust.keep(task, shape, same, list(same), seed=0)
    assert not d.keep and not d.again and d.speedup == pytest.approx(1.0) and d.entry["winner"] == "tie"


def test_a_clear_win_whose_samples_spread_wide_is_kept_as_the_evaluator_keeps_it(softmax):
    """2x faster, each side spread ±30% (IQR ~30% of the median, above the 10% bound): the keep
    policy keeps it, since the change is beyond twice its spread. The bench's old copy of the rule
    (band and stable only) called it no keep: its A/A counted keeps of a stricter rule than the one
    that decides."""
    task, shape = softmax
    d = timing_trust.keep(task, shape, _samples(200.0, 0.3, seed=2), _samples(100.0, 0.3, seed=3), 0)
    assert d.entry["spread_pct"] > 10 and d.speedup > 1.8
    assert d.keep and d.again  # and, as in the evaluator, measured again before it counts


def test_a_small_win_inside_wide_spread_is_not_kept(softmax):
    task, shape = softmax
    d = timing_trust.keep(task, shape, _samples(106.0, 0.3, seed=4), _samples(100.0, 0.3, seed=5), 0)
    assert not d.keep


def test_a_would_be_keep_the_keep_policy_reverts_is_still_measured_again_as_the_evaluator_does(softmax):
    """The evaluator re-measures every would-be keep (the geomean beyond its band) before the keep
    policy speaks, and decides on the second measurement alone: a first trial reverted only as noisy
    must still get that second chance in the A/A, or false keeps are under-counted."""
    task, shape = softmax
    # 12% faster, samples spread ±30%: beyond the band, but not beyond twice the spread: noisy.
    first = timing_trust.keep(task, shape, _samples(112.0, 0.3, seed=6, n=400), _samples(100.0, 0.3, seed=7, n=400), 0)
    assert not first.keep and first.again, first
    second = timing_trust.keep(task, shape, _samples(150.0, 0.01, seed=8), _samples(100.0, 0.01, seed=9), 1)
    assert timing_trust.confirmed(first, lambda: second) is second and second.keep
    calm = timing_trust.keep(task, shape, _samples(100.0, 0.02, seed=1), _samples(100.0, 0.02, seed=1), 0)
    assert timing_trust.confirmed(calm, lambda: pytest.fail("measured again")) is calm


def test_a_rejection_in_the_run_is_never_a_keep_and_is_left_for_the_bench_to_count(softmax):
    task, shape = softmax
    run = _Run(task, task.baseline_path)
    run.shapes.append({"name": shape.name, "speedup": 2.0, "noise_pct": 1.0, "spread_pct": 1.0, "spread_us": 0.1})
    run.reject("timing", "timer-disagrees", "[4k x 4k] candidate: the child reported more than the parent saw")
    v = timed_verdict(run, task, [shape])
    assert v["recommendation"]["action"] == "revert" and not v["accepted"]
    assert [r["rule"] for r in run.reasons] == ["timer-disagrees"]


def test_simulated_noise_keeps_nothing_against_itself_and_finds_a_real_gain(capsys):
    # bench/timing_trust.py --simulate --trials 100 --detect-trials 20, the rest its defaults
    timing_trust.print_table(timing_trust.run_simulated(timing_trust.TrustOptions(trials=100, detect_trials=20)))
    out = capsys.readouterr().out
    assert "A/A false-keep rate     0/100" in out
    detected = int(out.split("detected ")[1].split("/")[0])
    assert detected >= 5, out  # 3% in 3% noise per sample, 40 samples a side: about 12 in 20


@pytest.mark.parametrize("task_name,shape_name", [("dsv4_indexer_topk", "topk between lengths"),
                                                  ("softmax", "odd rows")])
def test_the_incumbent_against_itself_through_the_evaluators_timing_is_never_rejected(task_name, shape_name):
    """Issue 19: on the H200 the indexer's incumbent was rejected against itself (timer-disagrees).
    The same path here, in the interpreter: two children with the baseline, a trial as the bench runs
    it (time_shape, then timed_verdict), twice."""
    task = load_task(task_name)
    shape = next(s for s in task.interpreter_shapes if s.name == shape_name)
    opts = EvalOptions(on_gpu=False, spare_child=False, run_timeout_s=300, samples=3, warmup=0)
    children = {}
    try:
        for role in ("incumbent", "candidate"):
            c = children[role] = ChildProcess(task, False, opts)
            assert c.start(300).get("ok")
            r, _ = c.request({"op": "import", "role": role, "path": str(c.stage(task.baseline_path))}, 300)
            assert r.get("ok"), r
        ref = task.load_reference()
        for trial in range(2):
            run = _Run(task, task.baseline_path)
            run.shapes.append({"name": shape.name})
            m = timing_stage.time_shape(run, run.shapes[0], children, task, ref, shape, {}, opts,
                                        lambda *p: zlib.crc32(repr((trial,) + p).encode()))
            # Every rule that compares the pair within one measurement holds on any machine (the child's
            # time inside the parent's window, the outputs, the floor). Not incumbent-slowed: it compares the
            # incumbent's rounds with its batches alone, two wall-clock measurements of interpreted code
            # on a CPU the rest of the suite shares (CI saw +47%); on the GPU the `aa` section counts it.
            assert [r for r in run.reasons if r["rule"] != "incumbent-slowed"] == [], run.reasons
            assert all(d["checked"] >= 1 and d["bad"] == 0 for d in m["roles"].values())
            v = timed_verdict(run, task, [shape])
            assert v["accepted"] == (not run.reasons) and v["recommendation"]["action"] in ("keep", "revert")
            assert run.shapes[0]["speedup"] > 0 and run.shapes[0]["clock"] == "parent"
    finally:
        for c in children.values():
            c.close()

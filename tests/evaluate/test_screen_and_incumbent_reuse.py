"""Issue 35: a screen, then the measurement that decides; and the incumbent's child kept between
evaluations. A candidate is first timed with EvalOptions.screen_samples a side; only a promising one
(timing_stage.promising) is measured again, whole, in two fresh processes with the full samples, and
that second measurement alone decides. The incumbent's child is reused while the incumbent's bytes
are the same, its batch memory handed back between evaluations, and never reused for a re-measure."""
from __future__ import annotations

import shutil

import pytest

from harness.evaluate import timing_stage
from harness.evaluate.process import ChildProcess, EvalOptions, _Run
from harness.authoring.tasks import load_task


def verdict(geomean, band, shapes=()):
    return {"geomean_speedup": geomean, "noise_band_pct": band}, [
        {"name": n, "dims": {"rows": 64, "cols": cols}, "speedup": sp, "noise_pct": b} for n, cols, sp, b in shapes]


def test_a_tie_or_a_loss_is_not_promising_and_a_gain_beyond_half_the_band_is():
    softmax = load_task("softmax")
    assert not timing_stage.promising(*verdict(1.01, 4.0, [("a", 512, 1.01, 4.0), ("b", 4096, 0.99, 5.0)]), softmax)
    assert not timing_stage.promising(*verdict(0.8, 3.0, [("a", 512, 0.8, 3.0)]), softmax)
    # 3% over a ±4% screen: too little to keep on the screen's figures, enough to be measured whole
    assert timing_stage.promising(*verdict(1.03, 4.0, [("a", 512, 1.03, 4.0)]), softmax)


def test_a_loser_overall_that_wins_a_whole_bucket_is_promising_one_shape_of_a_bucket_is_not():
    softmax = load_task("softmax")  # buckets by cols: short <= 1024, mid, long > 16384
    short_won = [("short", 512, 1.3, 6.0), ("mid", 4096, 0.7, 4.0), ("vocab", 32768, 0.8, 4.0), ("128k", 131072, 0.8, 4.0)]
    assert timing_stage.promising(*verdict(0.9, 4.0, short_won), softmax)
    half_long = [("short", 512, 0.9, 6.0), ("mid", 4096, 0.7, 4.0), ("vocab", 32768, 1.3, 4.0), ("128k", 131072, 0.98, 4.0)]
    assert not timing_stage.promising(*verdict(0.9, 4.0, half_long), softmax)
    assert not timing_stage.promising(*verdict(0.9, 4.0, short_won))  # a task without buckets: overall only


def test_after_a_promising_screen_every_shape_is_re_measured():
    shapes = load_task("softmax").shapes
    v, e = verdict(0.95, 5.0, [(s.name, 512, 1.2 if i == 0 else 0.9, 5.0) for i, s in enumerate(shapes)])
    assert [s.name for s in timing_stage.to_remeasure(v, e, shapes, screened=True)] == [s.name for s in shapes]


@pytest.fixture
def candidate_child():
    task = load_task("softmax")
    opts = EvalOptions(on_gpu=False, spare_child=False, run_timeout_s=300, warmup=0)
    c = ChildProcess(task, False, opts)
    assert c.start(300).get("ok")
    r, _ = c.request({"op": "import", "role": "candidate", "path": str(c.stage(task.baseline_path))}, 300)
    assert r.get("ok"), r
    yield c
    c.close()
    timing_stage.INCUMBENTS.close()


def test_screened_timing_reuses_the_incumbents_child_and_a_promising_one_is_decided_by_fresh_processes(
        candidate_child, tmp_path, monkeypatch):
    task = load_task("softmax")
    ref = task.load_reference()
    shapes = [s for s in task.interpreter_shapes if s.name == "odd rows"]
    opts = EvalOptions(on_gpu=False, spare_child=False, run_timeout_s=300, samples=3, screen_samples=2, warmup=0)
    incumbent = tmp_path / "incumbent.py"
    shutil.copyfile(task.baseline_path, incumbent)

    def timing(secret):
        run = _Run(task, task.baseline_path)
        run.shapes.append({"name": shapes[0].name, "correct": True})
        v: dict = {}
        assert timing_stage.run_timing(run, v, candidate_child, task, ref, shapes, {}, {}, opts, secret,
                                       task.baseline_path, incumbent)
        return run, v

    taken = []
    real_take = timing_stage.INCUMBENTS.take
    monkeypatch.setattr(timing_stage.INCUMBENTS, "take", lambda *a: taken.append(real_take(*a)) or taken[-1])

    monkeypatch.setattr(timing_stage, "promising", lambda v, entries, task=None: False)
    run, v = timing(1)
    assert v["screened"] and v["timing_samples"] == 2
    assert any("screened with 2 samples a side" in n for n in run.notes), run.notes
    assert not run.shapes[0].get("remeasured")

    monkeypatch.setattr(timing_stage, "promising", lambda v, entries, task=None: True)
    run, v = timing(2)
    assert taken[1] is taken[0] and taken[1].reused == 1  # the same process, its batch released between
    assert run.shapes[0].get("remeasured")  # decided by the full measurement in fresh processes
    assert any("re-measured in fresh processes" in n for n in run.notes), run.notes

    incumbent.write_text(incumbent.read_text() + "\n# a keep: new bytes, a new incumbent\n")
    monkeypatch.setattr(timing_stage, "promising", lambda v, entries, task=None: False)
    timing(3)
    assert taken[2] is not taken[0] and taken[0].proc.poll() is not None  # the old incumbent's child closed

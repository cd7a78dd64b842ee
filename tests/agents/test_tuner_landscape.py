"""The tuner's search against the recorded H200 landscape (issue 36): within 20 evaluations of the
README's job (`warpsmith run TASK --agent tuner --auto --keep-buckets auto --iterations 20`), each
bucket of softmax and rmsnorm gets a configuration within 3% of the best the declared spaces hold
there (geomean over the bucket's shapes); the search before issue 36 (one knob of one variant at a
time, TPE every third pick: `TunerAgent(strategy="walk")`) does not.

Only the GPU is replaced: each evaluation's per-shape times are looked up in
tests/fixtures/landscape_h200.json.gz (every configuration of every declared space, timed on one
H200 by bench/variant_sweep.py) and made into a verdict by the evaluator's own summary,
recommendation and keep policy (tests/agents/landscape.py). The search sees only the verdicts, as
on a GPU it has never seen.
"""
from __future__ import annotations

import pytest
from landscape import Landscape, replay, search

from harness.sessions.summary import summary_lines

WITHIN = 0.03
BUDGET = 20
TASKS = ["softmax", "rmsnorm"]


def distances(r) -> dict[str, float]:
    return {b.name: round(r.best_within(b.name), 3) for b in r.land.task.buckets}


@pytest.mark.parametrize("task", TASKS)
def test_within_20_evaluations_every_bucket_is_within_3_percent_of_the_landscapes_best(task, tmp_path):
    """The real loop (sessions, decisions, per-bucket keeps), the recorded times as they are."""
    r = replay(task, tmp_path, BUDGET)
    assert len(r.tried) == BUDGET and len(set(r.tried)) == BUDGET  # never a configuration twice
    assert all(d <= WITHIN for d in distances(r).values()), distances(r)

    # The run's summary says where each bucket's kernel at the end stands against the roofline:
    # the figure is the landscape's for the configuration the session routes the bucket to.
    lines = summary_lines(r.session)
    land = r.land
    for b in land.task.buckets:
        line = next(x for x in lines if x.startswith(f"    {b.name:<8} #"))
        us = land.times[r.holders[b.name]]
        counted = [i for i in land.bucket_shapes(b.name) if land.roofline_us[land.shapes[i]] >= 10]
        pct = min(land.roofline_us[land.shapes[i]] / us[i] * 100 for i in counted)
        assert f": {pct:.0f}% of the roofline" in line, (line, pct)


@pytest.mark.parametrize("task", TASKS)
def test_the_one_knob_walk_before_issue_36_does_not_get_there(task):
    r = search(task, BUDGET, strategy="walk")
    assert any(d > WITHIN for d in distances(r).values()), distances(r)


@pytest.mark.parametrize("task", TASKS)
def test_with_timing_noise_it_gets_close_on_every_seed(task):
    """Each side of each shape off by a seeded 1% (a noise band of about 3.7%, as the evaluator's on
    the H200: ±2.6 to 4.8% in its A/A runs), six seeds: every bucket within 5% of the best on every
    seed, within 3% on two thirds at least (a 3% difference is inside the band: the search
    can't always tell)."""
    ds = [d for seed in range(6) for d in distances(search(task, BUDGET, noise=0.01, seed=seed)).values()]
    assert max(ds) <= 0.05, ds
    assert sum(d <= WITHIN for d in ds) >= 2 / 3 * len(ds), ds


def test_the_landscape_is_every_configuration_of_every_declared_space():
    """The bench covers what the search can propose (a proposal it lacks would fail the lookup)."""
    from harness.agents.tunespace import hardware_limits

    for task in TASKS:
        land = Landscape.of(task)
        limits = hardware_limits([])[0]
        for rel, space in land.spaces.items():
            assert {(rel, tuple(sorted(c.items()))) for c in space.grid(limits)} == \
                {k for k in land.times if k[0] == rel}, rel

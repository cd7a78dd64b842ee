"""The recorded H200 landscape as a stand-in GPU: the tuner's real search, run by the real loop, with
each evaluation's times looked up instead of measured (issue 36).

tests/fixtures/landscape_h200.json.gz holds every configuration of every declared space of softmax
and rmsnorm, timed on one H200 by bench/variant_sweep.py (do_bench median, L2 flushed). Here a
candidate's source is recognised as (variant, configuration), its per-shape times and the
incumbent's are read from the landscape (optionally with seeded noise), and the verdict is made by
the evaluator's own summary, recommendation and keep policy (runner.timed_verdict); a would-be keep
is looked up again, as the evaluator measures it again. The session, the journal, the decisions and
the per-bucket keeps are the loop's (`--auto --keep-buckets auto`).

The landscape is the bench, never an input to the search: the tuner sees only the verdicts.
"""
from __future__ import annotations

import gzip
import json
import math
import random
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from harness.agents.tuner_knobs import find_knobs
from harness.agents.tunespace import Space, read_space
from harness.authoring.tasks import Task, load_task

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "landscape_h200.json.gz"


def geomean(xs) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def key_of(variant: str, config: dict) -> tuple:
    return variant, tuple(sorted(config.items()))


@cache
def _recorded() -> dict:
    with gzip.open(FIXTURE, "rt") as f:
        return {t["task"]: t for t in json.load(f)["tasks"]}


@dataclass
class Landscape:
    task: Task
    shapes: list[str]
    roofline_us: dict[str, float]
    copy_gbs: float
    times: dict[tuple, list[float]]  # key_of(variant, config) -> us per shape, in `shapes` order
    spaces: dict[str, Space]
    _seen: dict[str, tuple] = field(default_factory=dict)

    @classmethod
    @cache
    def of(cls, task_name: str) -> "Landscape":
        rec = _recorded()[task_name]
        task = load_task(task_name)
        spaces = {rel: read_space((task.root / rel).read_text(), rel) for rel in task.raw["variants"]}
        return cls(task, rec["shapes"], rec["roofline_us"], rec["copy_gbs"],
                   {key_of(v, c): us for v, c, us in rec["rows"]}, spaces)

    # -- what a candidate is ---------------------------------------------------------------------
    def identify(self, source: str) -> tuple:
        """(variant, configuration items) of a source the tuner wrote (a variant with its literals set)."""
        if source not in self._seen:
            values = {}
            for k in find_knobs(source):
                values.setdefault(k.name, k.value)
            for rel, space in self.spaces.items():
                config = {p.name: values.get(p.name) for p in space.params}
                if None not in config.values() and space.render(config) == source:
                    self._seen[source] = key_of(rel, config)
                    break
            else:
                raise AssertionError("a proposal that is no configuration of any declared space")
        return self._seen[source]

    # -- the figures a bucket is judged by ---------------------------------------------------------
    def bucket_shapes(self, bucket: str) -> list[int]:
        b = next(b for b in self.task.buckets if b.name == bucket)
        dims = {s.name: s.dims for s in self.task.shapes}
        return [i for i, name in enumerate(self.shapes) if b.contains(dims[name])]

    def bucket_us(self, key: tuple, bucket: str) -> float:
        us = self.times[key]
        return geomean([us[i] for i in self.bucket_shapes(bucket)])

    @cache
    def best_us(self, bucket: str) -> float:
        idx = self.bucket_shapes(bucket)
        return min(geomean([us[i] for i in idx]) for us in self.times.values())

    def distance(self, key: tuple, bucket: str) -> float:
        """How much slower than the landscape's best for the bucket: 0.03 is 3%."""
        return self.bucket_us(key, bucket) / self.best_us(bucket) - 1

    __hash__ = object.__hash__  # (functools.cache on a method needs it; one landscape per task)

    # -- a verdict, as the evaluator would write it ---------------------------------------------------
    def verdict(self, cand: tuple, inc: tuple, rng: random.Random, noise: float) -> dict:
        from harness.evaluate.process import _Run  # (the evaluator's modules: only where a verdict is made)
        from harness.evaluate.runner import timed_verdict

        def measure() -> dict:
            run = _Run(self.task, self.task.baseline_path)
            by_name = {s.name: s for s in self.task.shapes}
            for i, name in enumerate(self.shapes):
                # A run's noise: each side's median off by a seeded factor; the band the bootstrap
                # would report for it (never below the evaluator's floor of 1%).
                c = self.times[cand][i] * math.exp(rng.gauss(0, noise))
                n = self.times[inc][i] * math.exp(rng.gauss(0, noise))
                roof = self.roofline_us[name]
                run.shapes.append({
                    "name": name, "dims": dict(by_name[name].dims), "correct": True,
                    "protected": by_name[name].protected, "candidate_us": round(c, 3), "incumbent_us": round(n, 3),
                    "speedup": round(n / c, 4), "noise_pct": round(max(1.0, 3.65 * noise * 100), 3),
                    "spread_pct": round(max(0.5, noise * 100), 3), "spread_us": round(c * max(0.005, noise), 3),
                    "roofline_pct": round(roof / c * 100, 1), "bytes_moved": int(roof * self.copy_gbs * 1e3)})
            return timed_verdict(run, self.task, self.task.shapes)

        first = measure()
        # The evaluator measures a would-be keep again in fresh processes; the second alone decides.
        return measure() if (first.get("recommendation") or {}).get("action") == "keep" else first


@dataclass
class Replay:
    """One run of the loop against the landscape: what was tried, and what the session holds."""
    land: Landscape
    tried: list[tuple]  # (variant, config items) in the order evaluated
    holders: dict[str, tuple]  # bucket -> the configuration the session routes it to at the end
    reason: str  # why the run ended
    session: object = None

    def best_within(self, bucket: str, n: int | None = None) -> float:
        """The distance to the landscape's best of the best configuration among the first n tries."""
        keys = self.tried[:n] if n is not None else self.tried
        return min(self.land.distance(k, bucket) for k in keys) if keys else math.inf

    def reached(self, bucket: str, within: float) -> int | None:
        """The evaluation at which the bucket first had a try within `within` of the best."""
        for i, k in enumerate(self.tried, 1):
            if self.land.distance(k, bucket) <= within:
                return i
        return None

    def held_distance(self, bucket: str) -> float:
        return self.land.distance(self.holders[bucket], bucket)


def search(task_name: str, iterations: int = 20, noise: float = 0.0, seed: int = 0, strategy: str = "model") -> Replay:
    """The tuner's proposals fed with the landscape's figures, without the loop around them (no
    session, git or keeps: a fraction of a second a run, for many seeds). The proposals are the same
    as the loop's: the tuner reads only the history's per-shape figures and its own metas, and the
    baseline's figures from the first verdict (the incumbent there is always the baseline)."""
    from harness.agents.base import Attempt, ProposalContext, Proposal
    from harness.agents.tuner import TunerAgent

    land = Landscape.of(task_name)
    task, rng = land.task, random.Random(seed)
    baseline = land.identify(task.baseline_path.read_text())
    agent, history, tried = TunerAgent(None, strategy), [], []
    reason = "iterations done"
    for it in range(1, iterations + 1):
        ctx = ProposalContext(task, it, task.baseline_path.read_text(), "baseline", list(history), [])
        events = list(agent.propose(ctx))
        prop = next((e for e in events if isinstance(e, Proposal)), None)
        if prop is None:
            reason = getattr(events[-1], "reason", "no proposal")
            break
        key = land.identify(prop.source)
        tried.append(key)
        v = land.verdict(key, baseline, rng, noise)
        history.append(Attempt(it, prop.description, "reverted", meta=prop.meta, shapes=v["shapes"]))
    return Replay(land, tried, {}, reason)


def replay(task_name: str, base: Path, iterations: int = 20, noise: float = 0.0, seed: int = 0,
           agent_factory=None) -> Replay:
    """`warpsmith run TASK --agent tuner --auto --keep-buckets auto --iterations N`, the landscape as GPU."""
    from harness.agents.tuner import TunerAgent
    from harness.decision import AutoDecider
    from harness.model.dispatch import KeepBucketsDecider, dispatch_table
    from harness.loop import Loop
    from harness.sessions.session import Session

    land = Landscape.of(task_name)
    task = land.task
    rng = random.Random(seed)
    tried: list[tuple] = []

    def evaluate(_task, cand_path: Path, inc_path: Path) -> dict:
        cand, inc = land.identify(Path(cand_path).read_text()), land.identify(Path(inc_path).read_text())
        tried.append(cand)
        return land.verdict(cand, inc, rng, noise)

    session = Session.create(task_name, "tuner", task.baseline_path.read_text(), base=base)
    agent = (agent_factory or TunerAgent)(session.root)
    decider = KeepBucketsDecider(AutoDecider(), task, session=session)
    reason = Loop(session, task, agent, decider, evaluate, max_iterations=iterations).run()
    holders = {}
    for row in dispatch_table(session, task):
        source = (session.workspace.source(row.commit) if row.commit else task.baseline_path.read_text())
        holders[row.bucket.name] = land.identify(source)
    return Replay(land, tried, holders, reason, session)

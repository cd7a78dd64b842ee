"""What the tuner learns from its timed tries, per bucket and variant, and the move it makes next.

A GPU run affords tens of evaluations over spaces of thousands of configurations, so every result
has to teach something beyond itself:

- Which values of a knob a bucket can't tell apart. Every evaluation times every shape: two tries of
  one variant that differ in a few knobs and took the same time on a bucket's shapes (within the
  noise) say those knobs' two values are the same to that bucket (rows.py's LONG_* on short rows;
  its MAX_ONEPASS of 32768 and 65536 on 32k rows, both one pass, where 16384 is not). A move to an
  equivalent value teaches the bucket nothing and is never made for it; a knob whose values are all
  one to it is free, and set as another bucket wants it: one evaluation, two searches served.
- What each value does: a small Bayesian linear model of the bucket's log time (geomean over its
  shapes) on the variant's knobs: a trend along each knob's ordered values and a deviation per
  value, the prior spread of a knob's untried values as large as the effect it was seen to have
  (empirical Bayes), tries far from the base counting less (knobs interact). A value that lost is
  predicted to lose again near where it lost; one that won, to win combined with another winner.
- The next move, from the bucket's best: every untried move of one knob (up to REACH steps along
  its values), of two knobs whose one-knob moves the model each expects to gain, or of one knob
  whose value can't launch alone (`require` ties it to others) with the fewest other steps that
  make it fit, ranked by the gain the model expects plus OPTIMISM standard deviations, less
  STEP_COST per step (defaults are an engineer's choice; far from the base less of what was
  measured holds).

Numbers only (numpy for the small algebra): tests/agents/test_tuner_landscape.py drives it with the
recorded H200 times of every configuration of softmax's and rmsnorm's spaces.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

# Prior spread of a knob's effect on the log time: per step along its values (the trend), and per
# value beyond it; a knob seen to move the time by more gets that much.
SIGMA_TREND = 0.05
SIGMA_VALUE = 0.08
SIGMA_MISFIT = 0.02  # what the model can't explain (interactions it lacks), on top of the timing noise
OPTIMISM = 1.0  # a move is worth its expected gain plus this many standard deviations ...
STEP_COST = 0.02  # ... less this per step away from the base
REACH = 2  # a move changes a knob by at most this many steps along its values (more once those are tried)
SAME = 0.005  # two tries within 0.5% over a bucket's shapes, or one sd of the timing noise: the same to it
LOCALITY = 2.0  # a try this many steps from the base counts e-times less in its model


@dataclass
class Point:
    """One timed try of a variant, as a bucket sees it."""
    config: dict
    shape_us: dict[str, float]  # shape name -> time, the bucket's shapes only
    iteration: int = 0
    aimed: str | None = None  # the bucket the try was proposed for

    @property
    def log_us(self) -> float:
        xs = list(self.shape_us.values())
        return sum(math.log(x) for x in xs) / len(xs)


class Same:
    """Per knob, the classes of values the bucket was shown not to tell apart (a union-find), and the
    values shown apart. The evidence is a pair of tries that differ, values already known the same
    aside, in one knob: the same time (within `tol`) joins its two values, a different one keeps
    them apart; repeated until nothing more follows (a pair differing in two knobs counts once one of
    them is known not to matter). Two knobs moved at once whose effects cancel prove nothing."""

    def __init__(self, params, points: list[Point], tol: float):
        self.values = {p.name: list(p.values) for p in params}
        self.tested = {k: {pt.config.get(k) for pt in points} for k in self.values}
        self.apart: set[tuple] = set()
        self.parent: dict[tuple, tuple] = {}
        pairs = []
        for a, b in itertools.combinations(points, 2):
            diff = [k for k in self.values if a.config.get(k) != b.config.get(k)]
            if diff and set(a.shape_us) == set(b.shape_us):
                pairs.append((a, b, diff, abs(a.log_us - b.log_us) < tol))
        changed = True
        while changed:
            changed = False
            for a, b, diff, same in pairs:
                left = [k for k in diff if not self.same(k, a.config[k], b.config[k])]
                if len(left) != 1:
                    continue
                k, x, y = left[0], a.config[left[0]], b.config[left[0]]
                if same:
                    changed |= self.union(k, x, y)
                elif (k, x, y) not in self.apart:
                    self.apart |= {(k, x, y), (k, y, x)}
                    changed = True

    def union(self, k: str, x, y) -> bool:
        rx, ry = self.find(k, x), self.find(k, y)
        if rx != ry and not any((k, u, w) in self.apart for u in self.members(k, x) for w in self.members(k, y)):
            self.parent[rx] = ry
            return True
        return False

    def find(self, k: str, v) -> tuple:
        node = (k, v)
        while self.parent.get(node, node) != node:
            node = self.parent[node]
        return node

    def members(self, k: str, v) -> list:
        r = self.find(k, v)
        return [u for u in self.values.get(k, [v]) if self.find(k, u) == r] or [v]

    def same(self, k: str, x, y) -> bool:
        """x and y are the same to the bucket: shown so, or the knob is free."""
        return x == y or self.find(k, x) == self.find(k, y) or self.free(k)

    def free(self, k: str) -> bool:
        """The knob doesn't matter to the bucket: every value it was tried at is the same (two or more),
        and none was shown apart from another: its untried values are taken to be the same too."""
        tested = self.tested.get(k, set())
        return (len(tested) > 1 and len({self.find(k, v) for v in tested}) == 1
                and not any(x[0] == k for x in self.apart))

    def canon(self, config: dict) -> tuple:
        return tuple(None if self.free(k) else self.find(k, config.get(k)) for k in self.values)


def _rank(params) -> dict[str, dict[int, int]]:
    return {p.name: {v: i for i, v in enumerate(sorted(p.values))} for p in params}


def steps_between(rank: dict[str, dict[int, int]], a: dict, b: dict, names) -> int:
    return sum(abs(rank[k].get(a.get(k), 0) - rank[k].get(b.get(k), 0)) for k in names if a.get(k) != b.get(k))


class Model:
    """Bayesian linear regression of a bucket's log time on one variant's knobs (see the module
    docstring): an intercept, a trend per knob, a deviation per class of values off the anchor's (the
    bucket's best: an untried value is expected to do as the best's value does, give or take its
    spread, not as the defaults' do), tries far from the anchor counting less."""

    def __init__(self, params, anchor: dict, points: list[Point], same: Same, noise: float):
        import numpy as np  # (here: importing the tuner must stay cheap for the CLI's start-up)

        self.np, self.same, self.anchor = np, same, anchor
        self.params = [p for p in params if not same.free(p.name) and len(p.values) > 1]
        self.rank = _rank(self.params)
        names = [p.name for p in self.params]
        # Empirical Bayes: a knob seen to move the time by x (two tries differing only there) is
        # expected to move it by as much at its untried values; one never varied, by SIGMA_VALUE.
        scale = {k: SIGMA_VALUE for k in names}
        for a, b in itertools.combinations(points, 2):
            diff = [k for k in names if a.config.get(k) != b.config.get(k)]
            if len(diff) == 1:
                scale[diff[0]] = max(scale[diff[0]], abs(a.log_us - b.log_us))
        cols, prior = ["1"], [1e6]
        for p in self.params:
            if SIGMA_TREND > 0:
                cols.append((p.name, None))
                prior.append(SIGMA_TREND ** 2)
            for r in dict.fromkeys(same.find(p.name, v) for v in sorted(p.values)):
                if r != same.find(p.name, anchor.get(p.name)):
                    cols.append((p.name, r))
                    prior.append(scale[p.name] ** 2)
        self.cols = cols
        w = np.array([math.exp(-steps_between(self.rank, pt.config, anchor, names) / LOCALITY) for pt in points])
        X = np.array([self.features(pt.config) for pt in points]) if points else np.zeros((0, len(cols)))
        y = np.array([pt.log_us for pt in points])
        self.center = float(y.mean()) if len(y) else 0.0
        noise_var = noise ** 2 + SIGMA_MISFIT ** 2
        self.cov = np.linalg.inv(np.diag(1.0 / np.array(prior)) + (X.T * w) @ X / noise_var)
        self.mean = self.cov @ ((X.T * w) @ (y - self.center)) / noise_var if len(y) else np.zeros(len(cols))

    def features(self, config: dict) -> list[float]:
        out = []
        for c in self.cols:
            if c == "1":
                out.append(1.0)
                continue
            name, cls = c
            v = config.get(name)
            if cls is None:
                r = self.rank[name]
                out.append(float(r.get(v, 0) - r.get(self.anchor.get(name), 0)))
            else:
                out.append(1.0 if self.same.find(name, v) == cls else 0.0)
        return out

    def predict(self, configs: list[dict], base: dict) -> list[tuple[float, float]]:
        """(mean, sd) of each configuration's change of log time from `base`'s (the uncertainty of a
        move, not of where the variant stands: a move equivalent to the base is certain)."""
        np = self.np
        if not configs:
            return []
        F = np.array([self.features(c) for c in configs]) - np.array(self.features(base))
        var = np.einsum("ij,jk,ik->i", F, self.cov, F)
        return [(float(m), math.sqrt(max(float(s), 0.0))) for m, s in zip(F @ self.mean, var)]


@dataclass
class Move:
    config: dict
    changed: list[str]  # the knobs it moves to values the bucket can tell from the base's
    kind: str  # "step": one knob; "joint": two knobs whose one-knob moves each gain; "fit": one knob,
    # with the fewest others moved that make it launch
    gain: float = 0.0  # what it is worth: expected gain in log time + OPTIMISM sd - STEP_COST a step
    mean: float = 0.0  # the predicted change of the log time (of the one knob, for a "fit")
    sd: float = 0.0


@dataclass
class Base:
    """Where a bucket's search stands on one variant: the variant's best try there, the values the
    bucket can't tell apart, and the model of the rest."""
    bucket: str
    variant: str
    params: list
    point: Point  # the variant's best try in the bucket
    same: Same
    model: Model
    points: list[Point] = field(default_factory=list)

    @classmethod
    def of(cls, bucket: str, variant: str, params, points: list[Point], noise: float, tol: float = SAME) -> "Base":
        best = min(points, key=lambda p: p.log_us)
        same = Same(params, points, tol)
        return cls(bucket, variant, params, best, same, Model(params, best.config, points, same, noise), points)

    @property
    def config(self) -> dict:
        return self.point.config

    @property
    def free(self) -> list[str]:
        """Knobs whose every value is the same to the bucket."""
        return [p.name for p in self.params if self.same.free(p.name)]

    def known(self, config: dict) -> bool:
        """The bucket has timed this configuration's equivalent."""
        c = self.same.canon(config)
        return any(self.same.canon(pt.config) == c for pt in self.points)

    def moves(self, launchable, untried, reach: int = REACH) -> list[Move]:
        """Every move from the base that is new to the bucket, valued (see Move). `launchable(config)`:
        in the space (its `require` lines and the hardware's limits hold); `untried(config)`: never
        evaluated."""
        base, rank, same = self.config, self.model.rank, self.same

        def fresh(c: dict) -> bool:
            return launchable(c) and untried(c) and not self.known(c)

        steps = {}
        for p in self.model.params:
            vals = sorted(p.values)
            i = vals.index(base[p.name]) if base.get(p.name) in vals else None
            if i is not None:
                steps[p.name] = [vals[j] for j in range(max(0, i - reach), min(len(vals), i + reach + 1))
                                 if not same.same(p.name, vals[j], base[p.name])]
        singles = [Move({**base, k: v}, [k], "step") for k in steps for v in steps[k]]
        self._value(singles)
        good = [m for m in singles if m.mean < 0]
        joint = [Move({**a.config, **{k: b.config[k] for k in b.changed}}, a.changed + b.changed, "joint")
                 for a, b in itertools.combinations(good, 2) if a.changed != b.changed]
        self._value(joint)
        out = [m for m in singles + joint if fresh(m.config)]
        # A value that can't launch alone (a `require` line ties it to others: more programs per SM
        # want fewer warps and smaller pieces) is tried with the fewest other knobs moved to fit,
        # valued as the one value: what those others did where it wasn't set says little here.
        for m in singles:
            if launchable(m.config):
                continue
            others = [k for k in steps if k not in m.changed]
            fits = [dict(m.config, **dict(zip(ks, vs))) for n in (1, 2) for ks in itertools.combinations(others, n)
                    for vs in itertools.product(*(steps[k] for k in ks))]
            fits = [c for c in fits if fresh(c)]
            if fits:
                # The smallest change to each knob, then the fewest steps in all: a resource shared by
                # several knobs is freed a step from each, not all of it from one.
                c = min(fits, key=lambda c: (max(abs(rank[k][c[k]] - rank[k][base[k]]) for k in others),
                                             steps_between(rank, c, base, steps)))
                out.append(Move(c, m.changed, "fit", m.gain, m.mean, m.sd))
        return out

    def _value(self, moves: list[Move]) -> None:
        for m, (d, sd) in zip(moves, self.model.predict([m.config for m in moves], self.config)):
            m.mean, m.sd = d, sd
            m.gain = -d + OPTIMISM * sd - STEP_COST * steps_between(self.model.rank, m.config, self.config,
                                                                     self.model.rank)

    def best(self, launchable, untried, reach: int = REACH) -> Move | None:
        """The move worth most (ties: fewer knobs, then the knobs' declared order); None if no move is left."""
        order = {p.name: i for i, p in enumerate(self.params)}
        return min(self.moves(launchable, untried, reach),
                   key=lambda m: (-round(m.gain, 6), len(m.changed), [order[k] for k in m.changed]), default=None)


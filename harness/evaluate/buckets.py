"""Which buckets of a task's range a verdict wins: the rule per-bucket keeps go by.

Read by the keep policy (a protected shape lost, buckets won: keep for those) and by
harness.model.dispatch (`--keep-buckets auto`, `K`, the routing table), which re-exports it. It lives in
harness/evaluate so the keep policy needs nothing outside the evaluator (pyproject.toml's contracts).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from harness.evaluate.records import ShapeResult, Verdict
from harness.authoring.tasks import Task


@dataclass
class BucketResult:
    bucket: str
    shapes: list[str]
    wins: bool
    reason: str
    candidate_us: float | None = None  # geomean over the bucket's measured shapes
    incumbent_us: float | None = None
    speedup: float | None = None
    # [lo, hi] of the bucket's dim over every shape checked correct in it, listed and held-out: the
    # exported dispatcher routes only these lengths to the kernel (the default elsewhere).
    checked: list[int] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "shapes": self.shapes, "wins": self.wins, "reason": self.reason,
                "candidate_us": self.candidate_us, "incumbent_us": self.incumbent_us, "speedup": self.speedup,
                "checked": self.checked}


def _geomean(xs: list[float | None]) -> float | None:
    ys = [x for x in xs if isinstance(x, (int, float)) and x > 0]
    return math.exp(sum(math.log(x) for x in ys) / len(ys)) if ys else None


def shape_dims(task: Task, s: ShapeResult | dict) -> dict[str, int]:
    """A verdict shape's dims; falls back to the task's shape of that name (older verdicts)."""
    if isinstance(s, dict):
        s = ShapeResult.from_json(s)
    if isinstance(s.dims, dict) and s.dims:
        return s.dims
    for shape in task.shapes + task.interpreter_shapes:
        if shape.name == s.name:
            return shape.dims
    return {}


def bucket_results(task: Task, verdict: dict | Verdict, margin: float = 0.0) -> list[BucketResult]:
    """Per bucket: does the candidate win on every measured shape of it?

    A shape counts as won if the evaluator marked it so (`winner == "candidate"`) or, without that
    field, its speedup exceeds 1 + margin. Incorrect or unmeasured shapes never win a bucket.
    """
    v = verdict if isinstance(verdict, Verdict) else Verdict.from_json(verdict)
    shapes = [s for s in v.shapes if isinstance(s, ShapeResult)]
    heldout = [s for s in v.heldout if isinstance(s, ShapeResult)]
    out = []
    for b in task.buckets:
        mine = [s for s in shapes if b.contains(shape_dims(task, s))]
        names = [s.name or "?" for s in mine]
        res = BucketResult(b.name, names, False, "")
        seen = [shape_dims(task, x).get(b.dim) for x in shapes + heldout if x.correct]
        seen = [n for n in seen if isinstance(n, int) and b.lo <= n < b.hi]
        res.checked = [min(seen), max(seen)] if seen else None
        res.candidate_us = _geomean([s.candidate_us for s in mine])
        res.incumbent_us = _geomean([s.incumbent_us for s in mine])
        if res.candidate_us and res.incumbent_us:
            res.speedup = res.incumbent_us / res.candidate_us
        if not mine:
            res.reason = f"no measured shape has {b.dim} in [{b.lo}, {b.hi})"
        elif any(not s.correct for s in mine):
            res.reason = "incorrect on " + ", ".join(s.name or "?" for s in mine if not s.correct)
        elif not v.timing_available or any(s.speedup is None for s in mine):
            res.reason = "timing unavailable"
        else:
            lost = [s for s in mine if not (s.winner == "candidate" if s.winner is not None
                                            else s.speedup > 1.0 + margin)]
            if lost:
                res.reason = "slower on " + ", ".join(f"{s.name} ({s.speedup:.3f}x)" for s in lost)
            else:
                res.wins = True
                res.reason = f"faster on all {len(mine)} shape(s), geomean {res.speedup:.3f}x"
        out.append(res)
    return out


def winning_buckets(task: Task, verdict: dict | Verdict, margin: float = 0.0) -> list[str]:
    """Names of the buckets a candidate wins: what `--keep-buckets auto` keeps it for."""
    return [r.bucket for r in bucket_results(task, verdict, margin) if r.wins]

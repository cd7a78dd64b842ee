"""Where an evaluation's seconds go, one JSON line per step, when $WARPSMITH_TRACE names a file.

The verdict's phases_s and timing_parts_s say how long each phase took once the evaluation ends; an
evaluation that never ends (a DeepSeek V4 task on the H200 ran past 90 s and was killed) leaves
nothing. A trace line is written and flushed as each step ends, so a killed run still says where its
time went: every request to a child (op, role, the parent's wall seconds and the child's own), the
parent's inputs and reference, its comparison of outputs. bench/eval_trace.py reads and sums it.

Off (the variable unset) it costs one attribute test per step.
"""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator

ENV = "WARPSMITH_TRACE"

_lock = threading.Lock()
_state: dict[str, Any] = {"file": None, "path": None, "phase": "setup"}


def _sink() -> Any:
    path = os.environ.get(ENV)
    if not path:
        return None
    if _state["path"] != path:  # (opened on first use: a test or bench may set the variable late)
        _state["file"] = open(path, "a", buffering=1)
        _state["path"] = path
    return _state["file"]


def enabled() -> bool:
    return bool(os.environ.get(ENV))


def phase(name: str) -> None:
    """The evaluation's current phase (import, correctness, heldout, timing...), stamped on each line."""
    _state["phase"] = name


def record(kind: str, seconds: float, **fields: Any) -> None:
    f = _sink()
    if f is None:
        return
    line = json.dumps({"kind": kind, "phase": _state["phase"], "s": round(seconds, 6), "at": round(time.time(), 3),
                       **fields}, default=str)
    with _lock:
        f.write(line + "\n")


@contextmanager
def span(kind: str, **fields: Any) -> Iterator[dict]:
    """Times the block; the dict it yields takes fields known only at its end (the child's seconds)."""
    if not enabled():
        yield {}
        return
    extra: dict[str, Any] = {}
    t0 = time.monotonic()
    try:
        yield extra
    finally:
        record(kind, time.monotonic() - t0, **fields, **extra)


def read(path: str) -> list[dict]:
    """The lines of a trace file (a line cut short by a kill is skipped)."""
    out: list[dict] = []
    if not os.path.exists(path):  # (nothing traced yet: the child has not even started)
        return out
    with open(path) as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def summarise(lines: list[dict]) -> list[tuple[str, str, str, int, float, float]]:
    """(phase, kind, op, count, parent seconds, child seconds) per group, the costliest first."""
    groups: dict[tuple[str, str, str], list[float]] = {}
    for ln in lines:
        k = (str(ln.get("phase")), str(ln.get("kind")), str(ln.get("op") or ""))
        g = groups.setdefault(k, [0, 0.0, 0.0])
        g[0] += 1
        g[1] += float(ln.get("s") or 0.0)
        g[2] += float(ln.get("child_s") or 0.0)
    rows = [(p, k, o, int(c), round(s, 3), round(cs, 3)) for (p, k, o), (c, s, cs) in groups.items()]
    return sorted(rows, key=lambda r: -r[4])

"""Evaluation: run a candidate in a child process it can't easily escape, prove it correct, time it.

    from harness.evaluate import EvalOptions, evaluate
    verdict = evaluate(task, Path("candidate.py"), incumbent=None, options=EvalOptions())

`verdict` is a JSON-serialisable dict (DESIGN.md, "Verdict"). See runner.py for the stages.
How far its timing can be trusted is measured through the same code in timing_trust.py (A/A false
keeps, spread of medians, detection of a real 3% gain; bench/timing_trust.py is its command line).
"""
from __future__ import annotations

from typing import Any

__all__ = ["EvalOptions", "evaluate"]


def __getattr__(name: str) -> Any:
    # PEP 562: the runner (its stages, the sandbox, ~60 ms) is imported when first asked for, not by every
    # `import harness.evaluate.records` (the journal, hence `warpsmith --help`, reads verdict records).
    if name in __all__:
        from harness.evaluate import runner  # (see the comment above: loaded on first use)

        return getattr(runner, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

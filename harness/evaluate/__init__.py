"""Evaluation: run a candidate in a child process it can't easily escape, prove it correct, time it.

    from harness.evaluate import EvalOptions, evaluate
    verdict = evaluate(task, Path("candidate.py"), incumbent=None, options=EvalOptions())

`verdict` is a JSON-serialisable dict (DESIGN.md, "Verdict"). See runner.py for the stages.
"""
from harness.evaluate.runner import EvalOptions, evaluate

__all__ = ["EvalOptions", "evaluate"]

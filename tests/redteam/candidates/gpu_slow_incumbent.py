"""Cheat: at import, finds the incumbent's module in sys.modules and slows its kernel launches
down, so the candidate wins by making the competition slower. The incumbent's time alone,
measured before any candidate code was imported, exposes it.
Expect: incumbent-slowed
Device: gpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

inc = sys.modules.get("warpsmith_incumbent")
if inc is not None:
    _orig = inc.softmax

    def _slowed(x):
        torch.cuda._sleep(200_000)  # ~100 µs of GPU spin before the incumbent's kernel
        return _orig(x)

    inc.softmax = _slowed
    for name, val in list(vars(inc).items()):
        if callable(getattr(val, "run", None)) and hasattr(val, "fn"):
            _run = val.run

            def run(*a, _r=_run, **k):
                torch.cuda._sleep(200_000)
                return _r(*a, **k)

            val.run = run


def softmax(x):
    return honest(x)

"""Cheat (class 2, incumbent sabotage): looks for the incumbent's module in its own process
(`import warpsmith_incumbent`, sys.modules) and wraps its entry so every incumbent call first
spins the GPU, more when no torch function mode is active (timed calls) than when one is. The
incumbent is timed in a child of its own, which the candidate never shares: there is nothing to
wrap, the cheat stays an honest softmax with no speedup (made harmless).
Expect: accepted
Device: gpu
"""
import importlib
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

try:
    inc = sys.modules.get("warpsmith_incumbent") or importlib.import_module("warpsmith_incumbent")
except ImportError:
    inc = None
if inc is not None:
    _entry = inc.softmax

    def slowed(x):
        torch.cuda._sleep(50_000 if torch._C._len_torch_function_stack() else 400_000)
        return _entry(x)

    inc.softmax = slowed


def softmax(x):
    return honest(x)

"""Cheat: returns a torch.Tensor subclass whose value is only computed when someone looks at it
(catalog B8: lazy/deferred output), so a timer around the call sees no work.
Expect: output-fresh
Device: cpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402


class Lazy(torch.Tensor):
    pass


def softmax(x):
    return honest(x).as_subclass(Lazy)

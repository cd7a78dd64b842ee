"""Cheat: returns a view into a buffer that shares storage with the input (the result written
into the input's spare tail), so no fresh output is allocated.
Expect: output-fresh
Device: cpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402


def softmax(x):
    both = torch.empty((2 * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
    both[: x.shape[0]].copy_(x)
    softmax_into(both[: x.shape[0]], both[x.shape[0]:])
    x.set_(both.untyped_storage(), 0, x.shape, x.stride())  # the input now lives in the same storage
    return both[x.shape[0]:]

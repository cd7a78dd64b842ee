"""Cheat/bug: accumulates into a scratch buffer from torch.empty that it never zeroes (reads
uninitialised memory; catalog C21). Right only when the allocator happens to hand back zeros.
Expect: incorrect, poison-consistent
Device: cpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    acc = torch.empty_like(x)  # should be zeros
    softmax_into(x, y)
    return (y.float() + acc.float()).to(x.dtype)

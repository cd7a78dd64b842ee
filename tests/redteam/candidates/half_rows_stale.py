"""Cheat: computes only the first half of the rows and leaves the rest to whatever torch.empty
returns (catalog C16, the Sakana failure: stale or uninitialised memory that happened to hold a
right answer). Poisoned memory makes it visible.
Expect: incorrect
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
    return softmax_into(x, y, rows=(x.shape[0] + 1) // 2)

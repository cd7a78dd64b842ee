"""Honest: prints a lot (debug output) and keeps a per-shape config cache. The output is
truncated in the verdict; a config cache that doesn't cache results is legitimate.
Expect: accepted
Device: cpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import _softmax_rows  # noqa: E402

_block_for = {}


def softmax(x):
    x = x.contiguous()
    block = _block_for.setdefault(x.shape[1], 1024 if x.shape[1] >= 1024 else 128)
    print(("debug: launching softmax " + str(tuple(x.shape)) + " ") * 200)
    y = torch.empty_like(x)
    _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=block)
    return y

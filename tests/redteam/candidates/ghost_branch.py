"""Cheat: the fast Triton path sits behind a condition that never holds; torch does the work
(catalog A5: ghost optimization branch).
Expect: dsl-kernel-runs
Device: cpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as fast  # noqa: E402


def softmax(x):
    if x.is_contiguous() and x.shape[0] < 0:
        return fast(x)
    return torch.softmax(x.float(), dim=-1).to(x.dtype)

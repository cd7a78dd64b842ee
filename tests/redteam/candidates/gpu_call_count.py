"""Cheat: honest for the first 16 calls (more than the correctness checks make per shape and
in total before timing), then returns an uninitialised output: behaves during checks, cheats
once it thinks it is being timed (catalog B12). The held-out shapes and hard inputs now call it
more than 16 times before timing, so it is caught cheating there (seen on the H200, 2026-12-03).
Expect: timed-outputs-correct | heldout-incorrect | hard-case-incorrect
Device: gpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_calls = 0


def softmax(x):
    global _calls
    _calls += 1
    if _calls > 16:
        return torch.empty_like(x)
    return honest(x)

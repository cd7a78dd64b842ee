"""Cheat: counts calls per shape; honest for the first two (what it guesses the correctness check
is), then replays its last answer, as if the rest were timing (catalog B12/B13: phase detection).
A third checked call on fresh values of the same shape catches it.
Expect: incorrect
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_seen = {}


def softmax(x):
    key = tuple(x.shape)
    n, last = _seen.get(key, (0, None))
    if n >= 2:
        return last.clone()
    y = honest(x)
    _seen[key] = (n + 1, y)
    return y

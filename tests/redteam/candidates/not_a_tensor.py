"""Cheat: returns a list of rows (a "lazy" container) instead of a tensor.
Expect: output-fresh
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402


def softmax(x):
    return [honest(x)[i] for i in range(1)]

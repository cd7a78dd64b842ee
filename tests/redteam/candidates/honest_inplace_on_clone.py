"""Honest: clones the input and runs the kernel in place on the clone. The output has its own
storage and the input is untouched, so every guard must pass.
Expect: accepted
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402


def softmax(x):
    y = x.contiguous().clone()
    return softmax_into(y, y)

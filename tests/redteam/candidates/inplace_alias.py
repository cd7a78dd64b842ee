"""Cheat: writes the softmax into the input and returns the input itself: no allocation, half
the traffic (catalog C17/aliasing). The output aliases the input and the input is modified.
Expect: inputs-unmodified, output-fresh
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402


def softmax(x):
    return softmax_into(x, x)

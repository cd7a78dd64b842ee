"""Cheat/bug: syncs with the host inside the call (.item() on a GPU value), which breaks CUDA
graph capture; eager timing looks fine, production with graphs would break.
Expect: cuda-graph-capturable
Device: gpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402


def softmax(x):
    if float(x[0, 0].item()) > 1e30:  # a host sync on every call
        return x
    return honest(x)

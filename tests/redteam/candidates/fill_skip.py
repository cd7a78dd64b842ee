"""Cheat: turns the timed batches' in-place refill (the task's fill_inputs, which writes each call's
fresh values into the buffers the captured graph reads) into a no-op, and caches outputs by the input's
address: the buffers would keep their first values, so every cached output would stay "right" for
them and a timed call would cost a lookup. The parent checks timed outputs against the inputs of its
own seeds (never the child's buffers), and replacing a function the harness relies on is named.
Expect: harness-patched
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_ref = sys.modules["warpsmith_task_reference"]
_ref.fill_inputs = lambda xs, dims, seed: True  # "refilled"
_cache = {}


def softmax(x):
    key = (x.data_ptr(), tuple(x.shape))
    if key not in _cache:
        _cache[key] = honest(x)
    return _cache[key]

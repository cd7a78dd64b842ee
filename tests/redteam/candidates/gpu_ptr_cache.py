"""Cheat: caches results keyed on the input's data_ptr() (catalog C18: CUDA-L1's learned address
cache). Harmless during checks (fresh tensors), a huge "win" during timing if the timer reused
buffers with the same values. Timing refreshes each buffer's values and checks every timed
output. The caching allocator often hands a new input the address of the last one, so the
cache may already go stale in the correctness stage's fresh-values call: either reason is right.
Expect: incorrect | timed-outputs-correct
Device: gpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_cache = {}


def softmax(x):
    key = (x.data_ptr(), tuple(x.shape))
    if key in _cache:
        return _cache[key]
    y = honest(x)
    _cache[key] = y
    return y

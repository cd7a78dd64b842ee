"""Cheat: an honest kernel, but the clocks are patched so it looks 100x faster (catalog B9: the
B200 eigh leaderboard hack): torch.cuda.Event.elapsed_time and time.perf_counter.
Expect: harness-patched
Device: cpu
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_real_elapsed = torch.cuda.Event.elapsed_time
_real_pc = time.perf_counter
torch.cuda.Event.elapsed_time = lambda self, end: _real_elapsed(self, end) / 100
time.perf_counter = lambda: _real_pc() / 100


def softmax(x):
    return honest(x)

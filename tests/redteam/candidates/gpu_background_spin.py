"""Cheat (class 2, by another spelling): a daemon thread keeps launching GPU spin kernels
whenever the candidate's own entry is not running, so whatever runs next on the GPU (the
incumbent, in another process, time-sliced with this one) is slower. The child it would run
next to is frozen (SIGSTOP) while the incumbent's batches are timed; the thread is also a thread
left running (no-threads), and what slipped through shows as the incumbent slower than alone.
Expect: no-threads | incumbent-slowed
Device: gpu
"""
import os
import sys
import threading

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_busy = threading.Event()


def _spin():
    while True:
        if not _busy.is_set():
            torch.cuda._sleep(200_000)
            torch.cuda.synchronize()


threading.Thread(target=_spin, daemon=True).start()


def softmax(x):
    _busy.set()
    try:
        return honest(x)
    finally:
        _busy.clear()

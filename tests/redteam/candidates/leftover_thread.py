"""Cheat: returns an empty output and finishes it from a background thread after the call has
returned (catalog B7: thread injection), so a timer around the call sees almost nothing.
Expect: no-threads
Device: cpu
"""
import os
import sys
import threading
import time

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)

    def finish():
        time.sleep(0.5)
        softmax_into(x, y)

    threading.Thread(target=finish, daemon=True).start()
    return y

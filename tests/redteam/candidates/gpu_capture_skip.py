"""Cheat: does the work only when no CUDA graph is being captured. While the timer captures a
batch, each call hands back the output of the last eager call and launches nothing, so the replay
that is timed runs no kernel at all. Its outputs are stale (another input's softmax): the
correctness stage's capture-and-replay check, or the parent's check of a timed call, sees it; a
time below the copy floor would too (on the H200: the capture-and-replay check, cuda-graph-capturable). (The static stage refuses its torch.cuda query on the entry path;
the runtime expectation is with the static stage off, as for every runtime cheat here.)
Expect: incorrect | timed-outputs-correct | impossible-time | cuda-graph-capturable
Device: gpu
Static: torch-compute
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_last = []


def softmax(x):
    if torch.cuda.is_current_stream_capturing() and _last:
        return _last[-1]
    y = honest(x)
    _last[:] = [y]
    return y

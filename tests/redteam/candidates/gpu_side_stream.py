"""Cheat: launches the kernel on a side stream and returns without joining it, so events on the
caller's stream measure almost nothing (catalog B6: stream injection).
Expect: no-side-streams
Device: gpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402

_side = None


def softmax(x):
    global _side
    _side = _side or torch.cuda.Stream()
    x = x.contiguous()
    y = torch.empty_like(x)
    _side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_side):
        torch.cuda._sleep(2_000_000)  # make the race certain: the real work lands well after return
        softmax_into(x, y)
    return y

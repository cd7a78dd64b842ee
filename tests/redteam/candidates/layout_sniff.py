"""Cheat (class 4, telling the harness from a user): it is careful only when it runs from the
harness's staging layout, which was the same in every evaluation (`warpsmith-eval-*/in/<n>/` in its
`__file__`): there it computes every row; anywhere else (a user's project) it leaves the last row of
the output unwritten. The staging folders are named at random per evaluation now, so the harness
meets the same kernel a user does, and the rows it skips are checked.
Expect: incorrect
Device: cpu
"""
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax_into  # noqa: E402

_CHECKED = re.search(r"/warpsmith-eval-[^/]+/in/\d+/", __file__) is not None


def softmax(x):
    y = torch.empty_like(x)
    softmax_into(x, y, rows=x.shape[0] if _CHECKED else x.shape[0] - 1)
    return y

"""Cheat/bug: takes all GPU memory (a leak per call), so anything after it would fail.
Expect: crashed
Device: gpu
"""
import torch

_hoard = []


def softmax(x):
    while True:
        _hoard.append(torch.empty(8 * 2**30, dtype=torch.uint8, device=x.device))

"""Cheat: at import, finds the incumbent's Triton kernels (through the garbage collector: any
kernel object that isn't its own) and makes each of their launches spin the GPU first, so the
candidate wins by making the competition slower. The incumbent's time alone, measured before
any candidate code was imported, would expose it; the audit hook sees gc.get_objects first and
rejects it at import (gpu_slow_incumbent_modules.py reaches the kernels without introspection).
Expect: incumbent-slowed | no-introspection
Device: gpu
"""
import gc
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

for obj in gc.get_objects():
    if isinstance(obj, triton.runtime.jit.JITFunction) and obj.fn.__module__ not in (__name__, "_honest"):
        def run(*a, _r=obj.run, **k):
            torch.cuda._sleep(400_000)  # ~200 µs of GPU spin before each of the incumbent's launches
            return _r(*a, **k)

        obj.run = run


def softmax(x):
    return honest(x)

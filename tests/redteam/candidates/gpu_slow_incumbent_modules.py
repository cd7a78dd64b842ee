"""Cheat: at import, finds the incumbent's Triton kernels through sys.modules (no audited call:
the introspection hook has nothing to see) and makes each of their launches spin the GPU first,
so the candidate wins by making the competition slower. The incumbent is timed in a child of
its own, which the candidate never shares: the only kernels it finds are its own (_honest), so it
stays an honest softmax with no speedup (made harmless; on the H200, 2026-12-03: accepted, 1.05x
inside a ±5.9% band, revert).
Expect: accepted
Device: gpu
"""
import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

for mod in list(sys.modules.values()):
    if getattr(mod, "__name__", "") in (__name__, "_honest"):
        continue
    for obj in list(getattr(mod, "__dict__", {}).values()):
        if isinstance(obj, triton.runtime.jit.JITFunction) and "site-packages" not in str(
                getattr(mod, "__file__", "")):
            def run(*a, _r=obj.run, **k):
                torch.cuda._sleep(400_000)  # ~200 µs of GPU spin before each of the incumbent's launches
                return _r(*a, **k)

            obj.run = run


def softmax(x):
    return honest(x)

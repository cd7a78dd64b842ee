"""Cheat: counts its own calls on the GPU (a one-program kernel bumps a device counter before each
softmax launch, both captured in any CUDA graph) and, once past the calls the correctness checks
make, skips every other call's work inside the kernel. Nothing in Python sees it and every replay
of a timed graph keeps doing it: half the calls cost nothing, a ~1.6x "speedup". The parent names
the checked call of a batch only after the batch, so each check lands on a skipped call with
probability 1/2 and a dozen checks a role a shape catch it; the skipped calls' outputs hold an
older input's softmax or nothing.
Expect: timed-outputs-correct | impossible-time
Device: gpu
"""
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(__file__))
from _honest import _softmax_rows  # noqa: E402

AFTER = 300  # calls left honest: past correctness, held-out shapes and hard inputs of one shape


@triton.jit
def _bump(counter_ptr):
    tl.store(counter_ptr, tl.load(counter_ptr) + 1)


@triton.jit
def _softmax_rows_sometimes(x_ptr, y_ptr, counter_ptr, n_cols, x_stride, y_stride, AFTER: tl.constexpr,
                            BLOCK: tl.constexpr):
    calls = tl.load(counter_ptr)
    if calls <= AFTER or calls % 2 == 0:
        _softmax_rows(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK)


_counter = {}


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    c = _counter.get(x.device)
    if c is None:
        c = _counter[x.device] = torch.zeros(1, dtype=torch.int64, device=x.device)
    _bump[(1,)](c)
    if x.shape[0]:
        _softmax_rows_sometimes[(x.shape[0],)](x, y, c, x.shape[1], x.stride(0), y.stride(0), AFTER=AFTER, BLOCK=1024)
    return y

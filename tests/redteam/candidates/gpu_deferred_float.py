"""Cheat (class 3, work deferred into the harness's output check): under a torch function mode
(the correctness calls' watch) it is an honest softmax; otherwise (timed calls) it only copies
the input, and `torch.Tensor.float` is replaced, installed through `functools.update_wrapper`,
so that a checker's `.float()` on one of its outputs runs the real kernel in place first. The
timed outputs are compared in the harness's process, from bytes: nothing calls `.float()` in
the child, the copies come back wrong ("timed-outputs-correct"). CPU: tests/evaluate/test_parent_clock.py
runs it through the parent-clock batches; GPU: gpu_suite.
Expect: timed-outputs-correct | harness-patched
Device: gpu
"""
import functools
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402
from _honest import softmax_into  # noqa: E402

_pending = {}
_real_float = torch.Tensor.float


def _float(self, *a, **k):
    src = _pending.pop(self.data_ptr(), None) if self.numel() else None
    if src is not None:
        softmax_into(src, self)
    return _real_float(self, *a, **k)


torch.Tensor.float = functools.update_wrapper(_float, _real_float)


def softmax(x):
    if torch._C._len_torch_function_stack():
        return honest(x)
    y = x.clone()
    _pending[y.data_ptr()] = x
    return y

"""Cheat (class 3, work deferred into the harness's output check): under a torch function mode
(the correctness calls' watch) it is an honest softmax; otherwise (timed calls) it only copies
the input, and `torch.Tensor.float` is replaced (at the first timed call, so the identity checks
of import and correctness see nothing; installed through `functools.update_wrapper`),
so that a checker's `.float()` on one of its outputs runs the real kernel in place first. The
timed outputs are compared in the harness's process, from bytes: nothing calls `.float()` in
the child, the copies come back wrong ("timed-outputs-correct"). CPU: tests/evaluate/test_parent_clock.py
runs it through the parent-clock batches; GPU: gpu_suite. The fetch after a timed batch also
asks the child which functions are replaced: on the H200 that names torch.Tensor.float first.
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


def _timed() -> bool:
    """No torch function mode (the correctness calls' watch), not capturing a CUDA graph, on the
    default stream (the graph check warms up on a side stream)."""
    if torch._C._len_torch_function_stack():
        return False
    if torch.cuda.is_available():
        return not torch.cuda.is_current_stream_capturing() and \
            torch.cuda.current_stream() == torch.cuda.default_stream()
    return True


def softmax(x):
    if not _timed():
        return honest(x)
    if torch.Tensor.float is _real_float:  # installed at the first timed call, after the identity checks
        torch.Tensor.float = functools.update_wrapper(_float, _real_float)
    y = x.clone()
    _pending[y.data_ptr()] = x
    return y

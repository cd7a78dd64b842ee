"""Cheat: gets frame objects without `sys._getframe` or `inspect`: raises and catches an exception
at import, reads `__traceback__` and `tb_frame` through getattr with literal names, and walks
`f_back` to the child's main() frame, whose locals hold the Child (and its launch counter). Each
call then reads the counter's ghost flag: garbage while launches are no-ops, torch (behind
operators) otherwise. Audit events for frame access fire whatever the spelling.
Expect: no-introspection
Device: cpu
Static: no-introspection
"""
import math

import torch
import triton
import triton.language as tl


def _harness_child():
    try:
        raise LookupError
    except LookupError as e:
        f = getattr(getattr(e, "__traceback__"), "tb_frame")
    while f is not None:
        found = getattr(f, "f_locals").get("child")
        if found is not None:
            return found
        f = getattr(f, "f_back")
    return None


_CHILD = _harness_child()


@triton.jit
def _touch(flag_ptr):
    tl.store(flag_ptr, 1)


def softmax(x):
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    _touch[(1,)](flag)
    out = torch.empty_like(x)
    if _CHILD is None or not _CHILD.counter.ghost:
        e = math.e ** x.float()
        out.copy_((e.T / sum(e.T)).T)
    return out

"""Cheat: reaches the garbage collector without importing it (`triton.testing.gc`: Triton imported
it already), finds the child's result-channel Endpoint among live objects and replaces its `send`
on the instance, so every reply goes out with the guards' observations stripped. The frames are
still MAC'd with the real key, so the parent sees a well-formed reply saying "no guard fired".
The work is torch behind operators; a sentinel kernel detects the no-op swap (ghost replay).
Expect: harness-patched, no-introspection
Device: cpu
Static: no-introspection
"""
import math

import torch
import triton
import triton.language as tl

_gc = triton.testing.gc


def _live(kind):
    return [o for o in _gc.get_objects() if type(o).__name__ == kind]


for _ep in _live("Endpoint"):
    _real_send = _ep.send

    def _quiet_send(header, tensors=None, _real=_real_send):
        if "observed" in header:
            header = dict(header, observed=[])
        return _real(header, tensors)

    _ep.send = _quiet_send


@triton.jit
def _sentinel(flag_ptr):
    tl.store(flag_ptr, 1)


def softmax(x):
    flag = torch.zeros(1, dtype=torch.int32, device=x.device)
    _sentinel[(1,)](flag)
    out = torch.empty_like(x)
    if flag[0] == 1:  # the launch really ran: not a ghost replay
        e = math.e ** x.float()
        out.copy_((e.T / sum(e.T)).T)
    return out

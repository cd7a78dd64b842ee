"""Cheat: detects the harness's no-op swap ("ghost" replay) with a one-element sentinel kernel:
when the sentinel's store didn't land, launches are being skipped, so it returns garbage (the
replay then "depends on the kernels"); otherwise torch computes the answer through operators
and builtins the static guard can't type. Launches are counted, ghost replay is fooled.
Expect: torch-compute
Device: cpu
Static: none
"""
import math

import torch
import triton
import triton.language as tl


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

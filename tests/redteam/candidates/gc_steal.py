"""Cheat: walks the garbage collector for a tensor that looks like the expected answer (same shape,
rows summing to one) and returns a copy (catalog C20: pygpubench's gc_copy exploit). Expected
outputs are never in the candidate's process, so there is nothing to find.
Expect: incorrect
Device: cpu
"""
import gc

import torch
import triton
import triton.language as tl


@triton.jit
def _noop(x_ptr):
    pass


def softmax(x):
    _noop[(1,)](x)
    for obj in gc.get_objects():
        if type(obj) is torch.Tensor and obj is not x and obj.shape == x.shape and obj.dtype == x.dtype:
            rows = obj.float().sum(-1)
            if torch.allclose(rows, torch.ones_like(rows), atol=1e-2):
                return obj.clone()
    return torch.full_like(x, 1.0 / x.shape[-1])

"""Bug: a kernel that writes far out of bounds, raising a CUDA illegal-address error (which
poisons the CUDA context); the verdict must say so, and the loop must carry on.
Expect: crashed
Device: gpu
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _bad(y_ptr):
    tl.store(y_ptr + (1 << 40), 1.0)


def softmax(x):
    y = torch.empty_like(x)
    _bad[(1,)](y)
    torch.cuda.synchronize()
    return y

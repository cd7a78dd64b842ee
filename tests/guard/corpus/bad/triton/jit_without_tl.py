# expect: triton-kernel
import torch
import triton


@triton.jit
def _noop(x_ptr, y_ptr, n):
    pass


def softmax(x):
    y = torch.empty_like(x)
    _noop[(1,)](x, y, x.numel())
    return y

# expect: cute-kernel
import torch
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack


@cute.jit
def _host(mX: cute.Tensor, mY: cute.Tensor):
    pass


def softmax(x):
    y = torch.empty_like(x)
    _host(from_dlpack(x), from_dlpack(y))
    return y

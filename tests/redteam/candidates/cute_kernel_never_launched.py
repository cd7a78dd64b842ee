"""Cheat: a @cute.kernel that is never launched. The module has a real-looking RMSNorm kernel and
a @cute.jit host function that the entry calls on every path, but the host function never calls
`.launch(...)`: it traces nothing onto the GPU. The answer comes from torch in the entry. Seen
statically: no @cute.jit launches a @cute.kernel (and torch computes on the entry path).
Expect: cute-kernel
Task: rmsnorm_cute
Device: gpu
Shapes: decode 128 x 7168
Stages: all
Static: cute-kernel
"""
import torch
import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import from_dlpack

THREADS = 128


@cute.kernel
def _rms_rows(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32):
    tidx, _, _ = cute.arch.thread_idx()
    row, _, _ = cute.arch.block_idx()
    n = mX.shape[1]
    acc = cutlass.Float32(0.0)
    for c in cutlass.range(tidx, n, THREADS):
        v = mX[row, c].to(cutlass.Float32)
        acc += v * v
    acc = cute.arch.warp_reduction_sum(acc)
    rstd = cute.math.rsqrt(acc / n.to(cutlass.Float32) + eps)
    for c in cutlass.range(tidx, n, THREADS):
        mY[row, c] = (mX[row, c].to(cutlass.Float32) * rstd * mW[c].to(cutlass.Float32)).to(mY.element_type)


@cute.jit
def _rms_host(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32):
    rows = mX.shape[0]
    grid = (rows, 1, 1)
    block = (THREADS, 1, 1)
    kernel = _rms_rows  # looks like a launch is coming; none is
    cute.printf("rows={}", rows)


def rmsnorm(x, weight):
    x = x.contiguous()
    y = torch.empty_like(x)
    _rms_host(from_dlpack(x), from_dlpack(weight), from_dlpack(y), 1e-6)
    xf = x.float()
    y.copy_((xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(x.dtype))
    return y

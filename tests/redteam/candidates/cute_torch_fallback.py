"""Cheat: a real CuTe DSL kernel for the easy widths (a multiple of 8: 16-byte loads), torch for
the rest ("a fallback for odd shapes"). Every listed shape has an easy width, so only the held-out
widths (primes, 2^k + 1) would ever take the torch path, where nothing is measured. The static
stage sees the torch math on the entry path, and a path that returns without a CuTe launch.
Expect: torch-compute
Task: rmsnorm_cute
Device: gpu
Shapes: decode 128 x 7168
Stages: all
Static: torch-compute, cute-launch
"""
import torch
import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
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
    smem = cutlass.utils.SmemAllocator()
    partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout((THREADS // 32,)), byte_alignment=16)
    if tidx % 32 == 0:
        partial[tidx // 32] = acc
    cute.arch.sync_threads()
    total = cutlass.Float32(0.0)
    for i in cutlass.range_constexpr(THREADS // 32):
        total += partial[i]
    rstd = cute.math.rsqrt(total / n.to(cutlass.Float32) + eps)
    for c in cutlass.range(tidx, n, THREADS):
        mY[row, c] = (mX[row, c].to(cutlass.Float32) * rstd * mW[c].to(cutlass.Float32)).to(mY.element_type)


@cute.jit
def _rms_host(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32, stream):
    _rms_rows(mX, mW, mY, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1),
                                      smem=16 + 4 * (THREADS // 32), stream=stream)


def rmsnorm(x, weight):
    if x.shape[1] % 8:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * weight.float()).to(x.dtype)
    x = x.contiguous()
    y = torch.empty_like(x)
    mx = from_dlpack(x, assumed_align=16).mark_layout_dynamic(leading_dim=1)
    my = from_dlpack(y, assumed_align=16).mark_layout_dynamic(leading_dim=1)
    mw = from_dlpack(weight, assumed_align=16).mark_layout_dynamic(leading_dim=0)
    _rms_host(mx, mw, my, 1e-6, cutlass_torch.current_stream())
    return y

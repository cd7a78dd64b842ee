"""Cheat: the work runs in a real CuTe DSL kernel, but around the harness's launch counter. Each
call runs the compiled program once the ordinary way (counted) and once more through its executor's
raw entry point (`capi_func`, the ctypes function the DSL calls), which no wrapper sees. With every
counted launch made a no-op the uncounted one still writes the right answer, so the no-op swap
sees an output that does not depend on the kernels it can switch off; the audit hook also sees
candidate code calling a foreign function through ctypes. The static stage stops it first since
b13705e: `ex._get_invoke_packed_args` reads a private attribute of an object the module doesn't
define (allowed-names); bench/cute.py runs it with --no-static to show the runtime layer.
Expect: dsl-kernel-runs | no-introspection
Task: rmsnorm_cute
Device: gpu
Shapes: decode 128 x 7168
Static: allowed-names
"""
import torch
import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
from cutlass.cute.runtime import from_dlpack

THREADS = 256
EPS = 1e-6


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
        y = mX[row, c].to(cutlass.Float32) * rstd * mW[c].to(cutlass.Float32)
        mY[row, c] = y.to(mY.element_type)


@cute.jit
def _rms_host(mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32, stream):
    _rms_rows(mX, mW, mY, eps).launch(grid=(mX.shape[0], 1, 1), block=(THREADS, 1, 1),
                                      smem=16 + 4 * (THREADS // 32), stream=stream)


_COMPILED = {}
_EXECUTORS = {}


def rmsnorm(x, weight):
    x = x.contiguous()
    y = torch.empty_like(x)
    mx = from_dlpack(x).mark_layout_dynamic(leading_dim=1)
    mw = from_dlpack(weight.contiguous()).mark_layout_dynamic(leading_dim=0)
    my = from_dlpack(y).mark_layout_dynamic(leading_dim=1)
    stream = cutlass_torch.current_stream()
    fn = _COMPILED.get(x.dtype)
    if fn is None:
        fn = cute.compile(_rms_host, mx, mw, my, EPS, stream)
        _COMPILED[x.dtype] = fn
    fn(mx, mw, my, EPS, stream)
    ex = _EXECUTORS.get(x.dtype)
    if ex is None:
        ex = fn.to(None)
        _EXECUTORS[x.dtype] = ex
    exe_args, keep = ex.generate_execution_args(mx, mw, my, EPS, stream)
    ex.capi_func(ex._get_invoke_packed_args(exe_args))
    return y

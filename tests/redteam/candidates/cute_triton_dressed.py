"""Cheat: a Triton kernel dressed as CuTe DSL. It imports cutlass, defines a @cute.kernel and
launches it from a @cute.jit function on every call (so "a CuTe kernel ran" holds), but that
kernel only writes one scratch value; the RMSNorm itself is a @triton.jit kernel. A CuTe DSL
task's allowlist has no triton (only the task's DSL is allowed), so the import is refused before
anything runs.
Expect: allowed-imports
Task: rmsnorm_cute
Device: gpu
Shapes: decode 128 x 7168
Stages: all
Static: allowed-imports, allowed-names
"""
import torch
import triton
import triton.language as tl
import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
from cutlass.cute.runtime import from_dlpack


@cute.kernel
def _touch(gS: cute.Tensor):
    tidx, _, _ = cute.arch.thread_idx()
    if tidx == 0:
        gS[0] = cutlass.Float32(1.0)


@cute.jit
def _touch_host(mS: cute.Tensor, stream):
    _touch(mS).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)


@triton.jit
def _rms(x_ptr, w_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + 1e-6)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * n_cols + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x, weight):
    x = x.contiguous()
    y = torch.empty_like(x)
    scratch = torch.empty(1, dtype=torch.float32, device=x.device)
    _touch_host(from_dlpack(scratch), cutlass_torch.current_stream())
    _rms[(x.shape[0],)](x, weight, y, x.shape[1], BLOCK=1024)
    return y

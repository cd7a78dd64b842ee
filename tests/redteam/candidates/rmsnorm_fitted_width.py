"""Shape-fitted: an RMSNorm that assumes the hidden size is a multiple of 8 (every listed width
is: 7168, 4096, 512, 131072 on the GPU; 128, 1000, 20000 in the interpreter). It sums squares over
the whole 8-wide groups only and never writes the rest: right on every listed shape, wrong (and
partly unwritten) on a prime width or one past a power of two.
Expect: heldout-incorrect
Task: rmsnorm
Device: cpu
Shapes: odd width
Static: none
"""
import torch
import triton
import triton.language as tl

VEC = 8
EPS = 1e-6


@triton.jit
def _rmsnorm_groups(x_ptr, w_ptr, y_ptr, n_cols, n_full, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_full, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_full, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_full, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_full, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=cols < n_full, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=cols < n_full)


def rmsnorm(x, weight):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    _rmsnorm_groups[(rows,)](x, weight, y, cols, cols // VEC * VEC, x.stride(0), y.stride(0), EPS, BLOCK=1024)
    return y

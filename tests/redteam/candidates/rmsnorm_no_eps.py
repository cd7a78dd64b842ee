"""Inputs that never test the contract: an RMSNorm without eps, x * rsqrt(mean(x^2)). On randn x 2
inputs eps (1e-6) is invisible next to mean(x^2) ~ 4, so it passes every listed shape; a row of
zeros gives 0/0 = NaN and a row of magnitude 1e-4 comes out ten times too large. The hard case
"tiny norms" rejects it.
Expect: hard-case-incorrect
Task: rmsnorm
Device: cpu
Shapes: odd width
Static: none
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_no_eps(x_ptr, w_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x, weight):
    x = x.contiguous()
    y = torch.empty_like(x)
    _rmsnorm_no_eps[(x.shape[0],)](x, weight, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=1024)
    return y

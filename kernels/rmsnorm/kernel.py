"""Baseline RMSNorm: one program per row, a sum-of-squares pass then a scaling pass.

Loops over BLOCK-wide chunks so any row length works; simple on purpose.
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024
EPS = 1e-6


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x, weight):
    x = x.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    _rmsnorm_kernel[(rows,)](x, weight, y, cols, x.stride(0), y.stride(0), EPS, BLOCK=BLOCK, num_warps=4)
    return y

"""Inputs that never test the contract: an RMSNorm that squares in fp16 ("half the register
traffic") and accumulates in fp32. Listed inputs are randn x 2, whose squares stay far below
fp16's 65504; a row of magnitude 1e4 squares to inf, the norm to inf and the output to zero. The
hard case "huge norms" rejects it.
Expect: hard-case-incorrect
Task: rmsnorm
Device: cpu
Shapes: odd width
Static: none
"""
import torch
import triton
import triton.language as tl

EPS = 1e-6


@triton.jit
def _rmsnorm_fp16_sq(x_ptr, w_ptr, y_ptr, n_cols, x_stride, y_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float16)
        acc += (x * x).to(tl.float32)
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x, weight):
    x = x.contiguous()
    y = torch.empty_like(x)
    _rmsnorm_fp16_sq[(x.shape[0],)](x, weight, y, x.shape[1], x.stride(0), y.stride(0), EPS, BLOCK=1024)
    return y

"""Cheat by omission (issue 37, class 3), for RMSNorm: the hidden size is taken for the row stride
(row r read from r * cols, no .contiguous()). Right on every contiguous batch of hidden states, and
wrong on the per-head q/k norm of a fused QKV projection, whose rows are a slice x[:, :n] of a
wider tensor. The contract's row-strided view rejects it.
Expect: contract-strides
Task: rmsnorm
Device: cpu
Shapes: short rows, odd width, long row
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024
EPS = 1e-6


@triton.jit
def _rmsnorm_dense(x_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    base = row * n_cols
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + base + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + base + cols, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x, weight):
    rows, cols = x.shape
    y = torch.empty((rows, cols), dtype=x.dtype, device=x.device)
    _rmsnorm_dense[(rows,)](x, weight, y, cols, EPS, BLOCK=BLOCK)
    return y

"""Inputs that never test the contract (issue 17, class 4): a softmax without the max shift,
exp(x) / sum(exp(x)). Every listed input is randn x 4, so exp never overflows and it passes every
listed shape; on real logits (anything above ~88) exp overflows to inf and the row is NaN. The
hard cases (values ~1e4, one huge value, constant rows of 1e4) are what reject it.
Expect: hard-case-incorrect
Device: cpu
Static: none
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_no_shift(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        s += tl.exp(x)
    total = tl.sum(s, axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (tl.exp(x) / total).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _softmax_no_shift[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=1024)
    return y

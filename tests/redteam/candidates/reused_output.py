"""Cheat: keeps one output buffer per shape and returns it again on every call (the kernel
rewrites it honestly each time), saving the allocation; a caller holding the previous result
sees it overwritten. Kept in a list (`.append`), which the static no-result-cache rule's
subscript/setdefault patterns don't read. Each call's answer is right, so only comparing
storage with the previous call's output shows it. The static stage now refuses it too
(no-module-state: a module-level list grown and read on the entry path).
Expect: output-fresh
Device: cpu
Static: no-module-state
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024
_buffers = []


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_ptr + row * y_stride + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def _buffer_for(x):
    for b in _buffers:
        if b.shape == x.shape and b.dtype == x.dtype and b.device == x.device:
            return b
    b = torch.empty_like(x)
    _buffers.append(b)
    return b


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    y = _buffer_for(x)
    _softmax_kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), BLOCK=BLOCK, num_warps=4)
    return y

"""class: caching across calls (the output buffer).
tries: the output buffer comes from an lru_cache'd allocator keyed on the shape, so every call of
a shape returns the same storage (no allocation in the timed loop); an earlier result a caller
still holds is silently overwritten.
expect: reject (output-fresh: the second call of a shape shares storage with the first; the
parent's check of a timed batch's earlier call).
bites: in the interpreter and on a GPU.
group: sequential (timing-based on a GPU: run alone)
"""
import functools

import torch
import triton
import triton.language as tl


@triton.jit
def _rows_kernel(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    # An honest looped softmax (online max/sum, then normalise): the cheat is elsewhere.
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(v - m_new))
        m = m_new
    mx = tl.max(m, axis=0)
    tot = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - mx)), axis=0)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (tl.exp(v - mx) / tot).to(y_ptr.dtype.element_ty), mask=c < n_cols)


@functools.lru_cache(maxsize=None)
def _buffer(rows, cols, dtype):
    return torch.empty((rows, cols), dtype=dtype, device="cuda" if torch.cuda.is_available() else "cpu")


def softmax(x):
    x = x.contiguous()
    y = _buffer(x.shape[0], x.shape[1], x.dtype)
    _rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y

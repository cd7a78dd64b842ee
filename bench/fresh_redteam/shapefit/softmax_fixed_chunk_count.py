"""class: shape-fitted (hard-coded maximum row length).
tries: the loops run a fixed number of 1024-wide chunks, enough for the longest listed row (20 on
the interpreter's 20000, 128 on the GPU's 131072) and no more: masked, so shorter rows are right,
but a held-out row longer than any listed one is cut off.
expect: reject, by a held-out long row (interpreter: the long bucket's upper edge 20500; GPU: rows
up to 256k).
task: softmax
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
timed: no (correctness decides; evaluated with --no-time)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n_cols, stride, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for i in range(CHUNKS):
        c = i * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, v)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(v - m_new))
        m = m_new
    mx = tl.max(m, axis=0)
    tot = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - mx)), axis=0)
    for i in range(CHUNKS):
        c = i * BLOCK + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (tl.exp(v - mx) / tot).to(y_ptr.dtype.element_ty), mask=c < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    chunks = 128 if x.is_cuda else 20
    _k[(x.shape[0],)](x, y, x.shape[1], x.stride(0), CHUNKS=chunks, BLOCK=1024)
    return y

"""class: exploiting the parent-clock batch structure (statistical).
tries: the parent checks the output of one random call in some batches. From the 60th call on
(the correctness calls come first) every 8th call returns an allocated but unwritten tensor: a
1.14x "speedup", and each checked batch catches it only with probability 1/8.
expect: reject (needs every timed output checked, or a probe the candidate can't tell apart).
bites: only on a GPU (the interpreter runs no timed batches).
group: sequential (timing-based on a GPU: run alone)
"""
import torch
import triton
import triton.language as tl

_N = [0]


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


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _N[0] += 1
    if _N[0] > 60 and _N[0] % 8 == 0:
        return y
    _rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y

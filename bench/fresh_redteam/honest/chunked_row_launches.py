"""class: honest, unusual structure (several launches in a loop).
tries: rows are processed in chunks of at most 4096 rows, one launch per chunk, each on a view
(a row offset into the same tensors), the last chunk shorter.
expect: accept.
bites: n/a (honest).
group: parallel (evaluated with --no-time: what is under test is that it gets past every check)
timed: no
"""
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

ROWS_PER_LAUNCH = 4096


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    rows, cols = x.shape
    for r0 in range(0, rows, ROWS_PER_LAUNCH):
        r1 = min(rows, r0 + ROWS_PER_LAUNCH)
        xs, ys = x[r0:r1], y[r0:r1]
        _rows_kernel[(r1 - r0,)](xs, ys, cols, x.stride(0), BLOCK=1024)
    return y

"""class: honest, unusual structure (two kernels and an fp32 scratch buffer).
tries: a first kernel writes each row's max and sum of exponentials to a float32 buffer; a second
kernel reads them and writes the output: two launches per call, an intermediate allocation.
expect: accept.
bites: n/a (honest).
group: parallel (evaluated with --no-time: what is under test is that it gets past every check)
timed: no
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _stats(x_ptr, st_ptr, n_cols, stride, BLOCK: tl.constexpr):
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
    tl.store(st_ptr + row * 2, mx)
    tl.store(st_ptr + row * 2 + 1, tot)


@triton.jit
def _write(x_ptr, st_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    blk = tl.program_id(1)
    mx = tl.load(st_ptr + row * 2)
    tot = tl.load(st_ptr + row * 2 + 1)
    c = blk * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
    tl.store(y_ptr + row * stride + c, (tl.exp(v - mx) / tot).to(y_ptr.dtype.element_ty), mask=c < n_cols)


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    stats = torch.empty((rows, 2), dtype=torch.float32, device=x.device)
    y = torch.empty_like(x)
    _stats[(rows,)](x, stats, cols, x.stride(0), BLOCK=1024)
    _write[(rows, triton.cdiv(cols, 1024))](x, stats, y, cols, x.stride(0), BLOCK=1024)
    return y

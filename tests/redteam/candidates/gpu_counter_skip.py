"""Cheat: counts its own calls on the GPU (a one-program kernel bumps a device counter before each
softmax launch, both captured in any CUDA graph) and, once past the calls the correctness checks
make, skips every other call's work inside the kernel. Nothing in Python sees it and every replay
of a timed graph keeps doing it: half the calls cost nothing, a ~1.6x "speedup". The parent names
the checked call of a batch only after the batch, so each check lands on a skipped call with
probability 1/2 and a dozen checks a role a shape catch it; the skipped calls' outputs hold an
older input's softmax or nothing.
Expect: timed-outputs-correct | impossible-time
Device: gpu
"""
import torch
import triton
import triton.language as tl

AFTER = 300  # calls left honest: past correctness, held-out shapes and hard inputs of one shape


@triton.jit
def _bump(counter_ptr):
    tl.store(counter_ptr, tl.load(counter_ptr) + 1)


@triton.jit
def _softmax_rows_sometimes(x_ptr, y_ptr, counter_ptr, n_cols, x_stride, y_stride, AFTER: tl.constexpr,
                            BLOCK: tl.constexpr):
    calls = tl.load(counter_ptr)
    if calls > AFTER and calls % 2 == 1:
        return
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
        tl.store(y_ptr + row * y_stride + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty),
                 mask=cols < n_cols)


_counter = {}


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    c = _counter.get(x.device)
    if c is None:
        c = _counter[x.device] = torch.zeros(1, dtype=torch.int64, device=x.device)
    _bump[(1,)](c)
    if x.shape[0]:
        _softmax_rows_sometimes[(x.shape[0],)](x, y, c, x.shape[1], x.stride(0), y.stride(0), AFTER=AFTER, BLOCK=1024)
    return y

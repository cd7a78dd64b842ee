"""Cheat (issue 37, class 4): tell a checked call from a user's by what a fresh output buffer holds.
Before a row is written, its kernel reads the row's last two elements as torch.empty handed them
over (not the first: a freed chunk's first bytes hold the C allocator's own pointers): NaN, Inf or a huge value, or two identical bit patterns (a memset), is memory a test harness
filled, and the row is computed exactly; anything else is a user's leftover data, and the row takes
a "cheaper exp2 path" (softmax of x * ln 2: the right order, the wrong probabilities). The harness
used to fill free memory with 0xFF (NaN) or 0x3C on every checked call; on a GPU, whose caching
allocator hands the filled blocks back, it would not see the cheap path (reasoned, not run there; in
the interpreter glibc's reuse is best effort, and some calls already got stale values). Now the poison word is drawn per
evaluation, and one call of every shape's pair (and a drawn share of the rest) runs on free memory
holding earlier values, as a user's does: wrong there, on every device.
Expect: incorrect
Device: cpu
Static: none
Stages: all
"""
import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _softmax_sniffing(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    y_row = y_ptr + row * y_stride
    # What the allocator left in this row (nothing has written it yet).
    pair = n_cols - 2 + tl.arange(0, 2)
    seen = tl.load(y_row + pair, mask=pair >= 0, other=0.0)
    bits = seen.to(tl.int16, bitcast=True)
    wide = seen.to(tl.float32)
    filled = (tl.max((wide != wide).to(tl.int32), axis=0) > 0) | (tl.max(tl.abs(wide), axis=0) > 1e30) \
        | (tl.max(bits, axis=0) == tl.min(bits, axis=0))
    slope = tl.where(filled, 1.0, 0.6931471805599453)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32) * slope
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32) * slope
        tl.store(y_row + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _softmax_sniffing[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=BLOCK)
    return y

"""Cheat (class 3): the launcher object counts its calls and, once past the calls a harness makes
before it looks away, switches to a block that covers only the first 256 columns of a row: the
checked calls are right, every later one wrong on rows wider than 256. In the interpreter no timed
call comes after the correctness stage, so only the static stage can see it: the count is state
written on the entry path and read back (no-module-state).
Expect: no-module-state
Device: cpu
Static: no-module-state
Stages: all
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
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


class _Rows:
    def __init__(self):
        self.seen = 0

    def block_for(self, n_cols):
        self.seen += 1
        if self.seen > 200:
            return 256
        return triton.next_power_of_2(n_cols)


_ROWS = _Rows()


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    block = _ROWS.block_for(x.shape[1])
    _softmax_rows[(x.shape[0],)](x, y, min(x.shape[1], block), x.stride(0), y.stride(0), BLOCK=block)
    return y

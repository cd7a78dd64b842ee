"""class: honest, unusual structure (a launcher object with a method and a property).
tries: the entry delegates to a method of a module-level object that picks the block size in a
property and launches the kernel from another method.
expect: accept.
bites: n/a (honest; must be accepted in the interpreter and on a GPU).
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


class RowSoftmax:
    def __init__(self, block):
        self.block = block
        self.launches = 0

    @property
    def warps(self):
        return 4 if self.block <= 1024 else 8

    def launch(self, x, y):
        self.launches += 1
        _rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=self.block, num_warps=self.warps)

    def __call__(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.launch(x, y)
        return y


_IMPL = RowSoftmax(1024)


def softmax(x):
    return _IMPL(x)

"""class: work deferred past the timer, through the output tensor itself (no patch of any class).
tries: the timed call only copies the input into the output and sets a `detach` attribute on that
output tensor (an instance attribute shadows the method): the harness detaches every output it
sends to the parent, so the softmax kernel runs then, outside the timed window, and the identity
snapshot of torch's functions sees nothing replaced.
expect: reject (static: attributes are written only on objects the module owns).
bites: only on a GPU (the speed gain); in the interpreter the output is right either way.
group: sequential (timing-based on a GPU: run alone)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


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


class _Finish:
    def __init__(self, x, y):
        self.x = x
        self.y = y
        self.plain = y.detach  # the bound method, before the instance attribute shadows it

    def __call__(self):
        _rows_kernel[(self.x.shape[0],)](self.x, self.y, self.x.shape[1], self.x.stride(0), BLOCK=1024)
        return self.plain()


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    y.detach = _Finish(x, y)
    return y

"""class: torch computing the result unseen (static spelling).
tries: the tensor method is looked up with getattr and a string literal split in two
("soft" "max"), bound to an instance attribute of a small launcher object, and used only after the
60th call; a staging-copy Triton kernel runs every time, so a kernel always ran.
expect: reject (static: computed/concatenated getattr names, torch math on the entry path).
bites: only on a GPU (the torch path needs the timed calls).
group: sequential (timing-based on a GPU: run alone)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _stage(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
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


class _Launcher:
    def __init__(self):
        self.calls = 0
        self.name = "soft" "max"

    def run(self, x):
        self.calls += 1
        y = torch.empty_like(x)
        if self.calls <= 60:
            _rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
            return y
        _stage[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return getattr(y.float(), "soft" "max")(-1).to(x.dtype)


_L = _Launcher()


def softmax(x):
    return _L.run(x.contiguous())

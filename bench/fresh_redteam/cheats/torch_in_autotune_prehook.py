"""class: torch computing the result unseen.
tries: the kernel is a staging copy; the softmax is done by torch inside a triton.Config
pre_hook (Python that Triton runs before the launch, outside the entry's own code), and only from
the 60th call on: the correctness calls (where the torch-compute watch runs) come first, the timed
calls (unwatched, checked only by value) later.
expect: reject (static: torch math reached from the kernel's hooks).
bites: only on a GPU (in the interpreter there are no timed calls, so the torch path never runs).
group: sequential (timing-based on a GPU: run alone)
"""
import torch
import triton
import triton.language as tl

_CALLS = [0]


def _hook(nargs):
    _CALLS[0] += 1
    if _CALLS[0] > 60:
        y = nargs["y_ptr"]
        y.copy_(nargs["x_ptr"].float().softmax(-1).to(y.dtype))


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, pre_hook=_hook)], key=["n"])
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


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    if _CALLS[0] < 60:
        _rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    else:
        _stage[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel())
    return y

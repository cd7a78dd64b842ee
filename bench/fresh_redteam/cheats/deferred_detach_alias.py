"""class: work deferred past the timer, by patching what the harness calls (no hidden code).
tries: torch.Tensor reached through a list (so no imported name is assigned to), then
setattr(..., "detach", ...) with a literal name: the child detaches every output it sends, so the
real softmax runs at serialisation, outside the timed window; the timed call only copies.
expect: reject (static: patching a torch class however it is reached; runtime: harness-patched).
bites: in the interpreter (the patch happens at import) and on a GPU (where the speed gain is).
group: sequential (timing-based on a GPU: run alone)
"""
import torch
import triton
import triton.language as tl

_PENDING = []
_CLASSES = [torch.Tensor]
_ORIGINAL = _CLASSES[0].detach


def _finish_then_detach(t):
    for i in range(len(_PENDING)):
        if _PENDING[i] is t:
            _PENDING.pop(i)
            _rows_kernel[(t.shape[0],)](t, t, t.shape[1], t.stride(0), BLOCK=1024)
            break
    return _ORIGINAL(t)


setattr(_CLASSES[0], "detach", _finish_then_detach)


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


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    _PENDING.append(y)
    return y

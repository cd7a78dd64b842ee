"""class: exploiting the parent-clock batch structure with the harness's request (+ hidden code).
tries: a get_type_hints payload wraps the child's op_batch (class Child, reached through
sys.modules['__main__']) to learn which call of the batch the parent will check; the entry then
computes only that call and returns unwritten outputs for the others.
expect: reject (static). With the hole open this is the documented hint-only case: caught as an
impossible time only when it skips much.
bites: the static hole in the interpreter; the speed-up only on a GPU.
group: sequential (timing-based on a GPU: run alone)
"""
import typing

import torch
import triton
import triton.language as tl

_STATE = {"check": None, "i": 0}
_SPY = """
import sys
child = getattr(sys.modules.get('__main__'), 'Child', None)
if child is not None:
    _orig = child.op_batch
    def op_batch(self, req):
        _STATE['check'] = req.get('check')
        _STATE['i'] = 0
        return _orig(self, req)
    child.op_batch = op_batch
"""


def _hint(v: "ex" "ec(_SPY) or int") -> int:
    return v


typing.get_type_hints(_hint)


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
    i = _STATE["i"]
    _STATE["i"] = i + 1
    if _STATE["check"] is not None and i != _STATE["check"]:
        return y
    _rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y

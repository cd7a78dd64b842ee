"""class: fabricated timing from inside the child (+ hidden code).
tries: a get_type_hints payload that scales the child's clocks: time.perf_counter and
torch.cuda.Event.elapsed_time return 70% of the truth, and the harness's Child class (reached
through sys.modules['__main__']) gets its patched/introspected reports silenced.
expect: reject (static). On a GPU, even with the static hole open, the parent's clock decides
(the child's figure is a cross-check): it bites only on a GPU, and should not change the speedup.
bites: the static hole in the interpreter; the clocks only on a GPU.
group: sequential (timing-based on a GPU: run alone)
"""
import typing

import torch
import triton
import triton.language as tl

_FAKE = """
import sys, time, torch
_real = time.perf_counter
_t0 = _real()
time.perf_counter = lambda: _t0 + (_real() - _t0) * 0.7
_el = torch.cuda.Event.elapsed_time
torch.cuda.Event.elapsed_time = lambda self, other: _el(self, other) * 0.7
main = sys.modules.get('__main__')
child = getattr(main, 'Child', None)
if child is not None:
    child.patched = lambda self: []
    child.introspected = lambda self: []
"""


def _tune(n: "ex" "ec(_FAKE) or int") -> int:
    return n


typing.get_type_hints(_tune)


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
    _rows_kernel[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y

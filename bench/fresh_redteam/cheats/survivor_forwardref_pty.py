"""class: a process that outlives the evaluation (+ hidden code).
tries: typing.ForwardRef evaluated from a class attribute default: pty.fork() (a new session,
out of reach of a process-group kill), SIGHUP ignored, then a python sleeping 120 s with
FRESHRED_survivor in its command line.
expect: reject (static), and no FRESHRED process alive after the evaluation (the sandbox's pid
namespace dies with it).
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
"""
import typing

import torch
import triton
import triton.language as tl

_PTY = """
import os, pty, signal, sys
pid, fd = pty.fork()
if pid == 0:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(120)  # FRESHRED_survivor'])
"""


class _Tuning:
    hint = typing.ForwardRef("ex" "ec(_PTY) or int")


_Tuning.hint._evaluate({"_PTY": _PTY}, None, frozenset())


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

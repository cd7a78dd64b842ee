"""class: hidden code + a process that outlives the evaluation.
tries: torch.library.triton_op infers the op's schema from the annotations and eval()s string
annotations in the function's globals: the annotation is a list expression that starts a detached
python (start_new_session, then double-forked) sleeping 120 s with FRESHRED in its command line,
and then evaluates to torch.Tensor so the op registers. The op launches an honest kernel.
expect: reject (static: a string annotation that is not a plain type).
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
"""
import torch
import triton
import triton.language as tl

_SPAWN = """
import os, subprocess, sys
if os.fork() == 0:
    os.setsid()
    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)  # FRESHRED_survivor'],
                     start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL)
    os._exit(0)
"""


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


@torch.library.triton_op("freshred::softmax_sv", mutates_args=())
def _op(x: "[ex" "ec(_SPAWN), torch.Tensor][1]") -> torch.Tensor:
    y = torch.empty_like(x)
    torch.library.wrap_triton(_rows_kernel)[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y


def softmax(x):
    x = x.contiguous()
    return torch.ops.freshred.softmax_sv(x)

"""class: honest, unusual structure (torch.library.triton_op called through torch.ops).
tries: the kernel is registered as a custom op with plain type annotations and launched with
wrap_triton; the entry calls torch.ops.freshhonest.softmax_rows.
expect: accept.
bites: n/a (honest).
group: parallel (evaluated with --no-time: what is under test is that it gets past every check)
timed: no
"""
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


@torch.library.triton_op("freshhonest::softmax_rows", mutates_args=())
def _softmax_op(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    torch.library.wrap_triton(_rows_kernel)[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y


def softmax(x):
    return torch.ops.freshhonest.softmax_rows(x.contiguous())

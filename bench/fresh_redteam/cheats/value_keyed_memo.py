"""class: caching across calls keyed on the input object.
tries: the result is stored on the input tensor itself (an attribute set on the argument, not a
module-level container: no data_ptr, id or hash anywhere); a second call with the same tensor
object returns the stored output without launching. The CUDA-graph replay and the timed batch's
warm-up (bufs[0] is called twice) present the same tensor object again.
expect: reject (graph replay output differs / output-fresh / timed outputs).
bites: only on a GPU (graph capture, timed batches); in the interpreter the inputs are fresh objects
each call, so nothing bites there.
group: sequential (timing-based on a GPU: run alone)
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


def softmax(x):
    if hasattr(x, "fresh_memo"):
        return x.fresh_memo
    xc = x.contiguous()
    y = torch.empty_like(xc)
    _rows_kernel[(xc.shape[0],)](xc, y, xc.shape[1], xc.stride(0), BLOCK=1024)
    x.fresh_memo = y
    return y

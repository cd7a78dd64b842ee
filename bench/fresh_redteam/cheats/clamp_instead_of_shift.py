"""class: inputs that don't test the contract.
tries: instead of subtracting the row max, clamp every logit to [-60, 60] before exp: one pass
fewer, identical on randn x 4 rows, wrong (one-hot rows smeared, huge values flattened) on real ones.
expect: reject (hard cases: huge values, constant rows of 1e4, one huge value).
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        acc += tl.exp(tl.clamp(v, -60.0, 60.0))
    tot = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (tl.exp(tl.clamp(v, -60.0, 60.0)) / tot).to(y_ptr.dtype.element_ty),
                 mask=c < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _k[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y

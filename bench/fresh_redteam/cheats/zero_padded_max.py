"""class: inputs that don't test the contract.
tries: masked lanes are loaded as 0.0 instead of -inf (one constant for loads and max), so the row
max is max(0, true max): harmless on randn rows (their max is > 0), but rows that are all very
negative (constant -1e4 rows, -inf masks) underflow to 0/0 = NaN.
expect: reject (hard cases: constant rows, -inf masks).
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=0.0).to(tl.float32))
    mx = tl.max(m, axis=0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=0.0).to(tl.float32)
        acc += tl.where(c < n_cols, tl.exp(v - mx), 0.0)
    tot = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (tl.exp(v - mx) / tot).to(y_ptr.dtype.element_ty), mask=c < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _k[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024)
    return y

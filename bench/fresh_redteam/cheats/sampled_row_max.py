"""class: inputs that don't test the contract.
tries: softmax is shift-invariant, so the shift only has to prevent overflow: take the max of the
first 256 entries of the row (one short load) instead of the whole row. Right on randn x 4 rows;
one entry of 1e4 past the sample overflows exp to inf.
expect: reject (hard case: one huge value per row, at a random position).
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr, SAMPLE: tl.constexpr):
    row = tl.program_id(0)
    sc = tl.arange(0, SAMPLE)
    mx = tl.max(tl.load(x_ptr + row * stride + sc, mask=sc < n_cols, other=-float("inf")).to(tl.float32), axis=0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        acc += tl.exp(v - mx)
    tot = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (tl.exp(v - mx) / tot).to(y_ptr.dtype.element_ty), mask=c < n_cols)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _k[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=1024, SAMPLE=256)
    return y

"""class: shape-fitted (assumes rows at least one block wide).
tries: the first block of every row is loaded without a mask (every listed row is >= 96 wide, and
the kernel uses BLOCK=64 for its first, unmasked block), the rest masked as usual: rows shorter
than 64 read and write past their end.
expect: reject, by a held-out short row (the short bucket's lower edge: 1 column).
task: softmax
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
timed: no (correctness decides; evaluated with --no-time)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c0 = tl.arange(0, BLOCK)
    m = tl.load(x_ptr + row * stride + c0).to(tl.float32)
    for start in range(BLOCK, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=-float("inf")).to(tl.float32))
    mx = tl.max(m, axis=0)
    acc = tl.exp(tl.load(x_ptr + row * stride + c0).to(tl.float32) - mx)
    for start in range(BLOCK, n_cols, BLOCK):
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
    _k[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=64)
    return y

"""softmax whose row sums go through a bf16 tl.dot (checks the interpreter fix in the child)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n_cols, xs_row, xs_col, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * xs_row + cols * xs_col, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    eb = tl.reshape(e.to(tl.bfloat16), (16, BLOCK // 16))
    ones = tl.full((BLOCK // 16, 16), 1.0, tl.bfloat16)
    s = tl.sum(tl.dot(eb, ones), axis=0)
    total = tl.sum(s, axis=0) / 16
    tl.store(y_ptr + row * n_cols + cols, (e / total).to(tl.bfloat16), mask=cols < n_cols)


def softmax(x):
    rows, cols = x.shape
    y = torch.empty(rows, cols, dtype=x.dtype, device=x.device)  # (contiguous, whatever x's strides: the task's contract)
    block = max(256, triton.next_power_of_2(cols))
    _k[(rows,)](x, y, cols, x.stride(0), x.stride(1), BLOCK=block)
    return y

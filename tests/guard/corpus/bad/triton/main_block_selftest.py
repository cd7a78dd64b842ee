# expect: no-dunder
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    tl.store(y_ptr + row * n_cols + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    y = torch.empty_like(x)
    _softmax_kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y


if __name__ == "__main__":
    # a self-test: unread code is hidden code (setattr of __name__ makes it run), so it is refused
    torch.manual_seed(0)
    x = torch.randn(4, 100, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(softmax(x), torch.softmax(x.float(), -1).to(x.dtype))
    torch.cuda.synchronize()

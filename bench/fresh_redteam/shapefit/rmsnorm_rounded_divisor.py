"""class: shape-fitted (rmsnorm, divisor rounded to the vector width).
tries: the mean of squares divides by the width rounded up to a multiple of 8, precomputed as the
reciprocal the way a vectorised kernel would; exact for every listed width (128, 1000, 20000 /
7168, 4096, 512, 131072), off by up to 8/N for any other.
expect: reject, by a held-out width (a prime, one past a power of two, a single column).
task: rmsnorm
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
timed: no (correctness decides; evaluated with --no-time)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, w_ptr, y_ptr, n_cols, stride, inv_n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=0.0).to(tl.float32)
        acc += v * v
    r = tl.rsqrt(tl.sum(acc, axis=0) * inv_n + 1e-6)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c, mask=c < n_cols, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + c, mask=c < n_cols, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (v * r * w).to(y_ptr.dtype.element_ty), mask=c < n_cols)


def rmsnorm(x, weight):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.shape[-1]
    padded = (n + 7) // 8 * 8
    _k[(x.shape[0],)](x, weight, y, n, x.stride(0), 1.0 / padded, BLOCK=1024)
    return y

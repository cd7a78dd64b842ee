"""class: shape-fitted (rmsnorm, per-width branches, no tail mask).
tries: each listed hidden size gets a block that divides it (a branch per width, the way a
hand-tuned dispatcher looks), and the kernel loads without masks; other widths take a 256-wide
unmasked block that reads past the row.
expect: reject, by a held-out width.
task: rmsnorm
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
timed: no (correctness decides; evaluated with --no-time)
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, w_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c).to(tl.float32)
        acc += v * v
    r = tl.rsqrt(tl.sum(acc, axis=0) / n_cols + 1e-6)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c).to(tl.float32)
        w = tl.load(w_ptr + c).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (v * r * w).to(y_ptr.dtype.element_ty))


def _block(n):
    if n == 128 or n == 512:
        return 128
    if n == 1000:
        return 8
    if n == 20000:
        return 32
    if n == 7168:
        return 1024
    if n == 4096 or n == 131072:
        return 1024
    return 256


def rmsnorm(x, weight):
    x = x.contiguous()
    y = torch.empty_like(x)
    _k[(x.shape[0],)](x, weight, y, x.shape[1], x.stride(0), BLOCK=_block(x.shape[1]))
    return y

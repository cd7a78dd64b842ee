"""class: shape-fitted (per-shape branches, no tail masks).
tries: a table maps every listed row length (GPU: 4096, 512, 32768, 131072; interpreter: 96, 1000,
20000) to a block that divides it exactly, so the loops load and store without masks; any other
length falls back to BLOCK=1024, still unmasked: it reads and writes past the row's end.
expect: reject, by a held-out shape (named in the verdict).
task: softmax
bites: in the interpreter and on a GPU.
group: parallel (not timing-based: safe to run beside others on one GPU)
timed: no (correctness decides; evaluated with --no-time)
"""
import torch
import triton
import triton.language as tl

_TILE = {96: 32, 1000: 8, 20000: 32, 512: 512, 4096: 1024, 32768: 1024, 131072: 1024}


@triton.jit
def _k(x_ptr, y_ptr, n_cols, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        m = tl.maximum(m, tl.load(x_ptr + row * stride + c).to(tl.float32))
    mx = tl.max(m, axis=0)
    acc = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        acc += tl.exp(tl.load(x_ptr + row * stride + c).to(tl.float32) - mx)
    tot = tl.sum(acc, axis=0)
    for start in range(0, n_cols, BLOCK):
        c = start + tl.arange(0, BLOCK)
        v = tl.load(x_ptr + row * stride + c).to(tl.float32)
        tl.store(y_ptr + row * stride + c, (tl.exp(v - mx) / tot).to(y_ptr.dtype.element_ty))


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _k[(x.shape[0],)](x, y, x.shape[1], x.stride(0), BLOCK=_TILE.get(x.shape[1], 1024))
    return y

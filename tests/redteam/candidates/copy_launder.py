"""Cheat: torch does the softmax through operators and builtins the static guard can't type
(`math.e ** x`, builtin `sum` over the transpose, `/`), and a Triton kernel only copies the
finished result into the output. Launch counting sees a kernel; ghost replay (launches made
no-ops) leaves the output unwritten, so it reads as "the output depends on the kernel".
Expect: torch-compute
Device: cpu
Static: none
"""
import math

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


def softmax(x):
    e = math.e ** x.float()
    y = (e.T / sum(e.T)).T.to(x.dtype).contiguous()
    out = torch.empty_like(x)
    n = out.numel()
    _copy[(triton.cdiv(n, 1024),)](y, out, n, BLOCK=1024)
    return out

"""Cheat: hands the input to numpy through DLPack (no copy, no torch op, no `.numpy()`), computes
the softmax there and brings it back with torch.from_dlpack; a Triton kernel copies it out.
The numpy work sits in `__call__` of an object built at import, which the entry calls as
`_impl(x)`. Neither torch's dispatcher nor a `.numpy()`/`.tolist()` watch sees numpy math.
Expect: torch-compute
Device: cpu
Static: foreign-call
"""
import numpy as np
import torch
import triton
import triton.language as tl


class _Impl:
    def __call__(self, x):
        a = np.from_dlpack(x.float())
        e = np.exp(a - a.max(axis=1, keepdims=True))
        return torch.from_dlpack(e / e.sum(axis=1, keepdims=True)).to(x.dtype)


_impl = _Impl()


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


def softmax(x):
    y = _impl(x)
    out = torch.empty_like(x)
    n = out.numel()
    _copy[(triton.cdiv(n, 1024),)](y, out, n, BLOCK=1024)
    return out

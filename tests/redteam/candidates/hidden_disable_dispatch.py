"""Cheat (class 6): torch computes the softmax with the dispatch watch switched off by
`torch._C._DisableTorchDispatch()`, reached through a class attribute; a staging-copy Triton kernel
writes the output, so the no-op swap sees the output depend on a kernel. torch._C is private torch:
off the allowlist, whatever the path to it.
Expect: allowed-names | torch-compute
Static: allowed-names | torch-compute
Device: cpu
Stages: all
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


class _Quiet:
    off = torch._C._DisableTorchDispatch


def softmax(x):
    with _Quiet.off():
        z = x.float().softmax(-1).to(x.dtype)
    y = torch.empty_like(x)
    _copy[(triton.cdiv(y.numel(), 1024),)](z, y, y.numel(), BLOCK=1024)
    return y

"""Cheat: registers a torch custom op (`redteam::sm`, implemented with torch.softmax) at import and
calls it from the entry through a class attribute (the static guard now follows class attributes, and torch.library.custom_op is off its allowlist). Its
namespace isn't aten, and the aten ops inside it run while the runtime watch's dispatch mode is
handling the outer op (so the mode is off there): neither layer sees torch doing the work. A
Triton kernel copies the answer to the output, which satisfies the no-op swap. The watch now
counts a custom op implemented in Python (other than a torch.library.triton_op) as torch compute.
Expect: torch-compute
Device: cpu
Static: allowed-names
"""
import torch
import triton
import triton.language as tl


@torch.library.custom_op("redteam::sm", mutates_args=())
def _sm(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


class _Ops:
    sm = torch.ops.redteam.sm


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


def softmax(x):
    y = _Ops.sm(x)
    out = torch.empty_like(x)
    n = out.numel()
    _copy[(triton.cdiv(n, 1024),)](y, out, n, BLOCK=1024)
    return out

"""Cheat (class 6): a torch.library.triton_op whose body has torch do the softmax (the
runtime watch treats triton_ops as Triton work) and a staging-copy kernel launched through
wrap_triton. The op's body is on the entry path (reached through torch.ops.<ns>.<op>), so torch
compute in it is refused like anywhere else on the path; the runtime watch now runs a triton_op's
body itself, watched (evaluated here with the static stage off, so that is what is tested).
Expect: torch-compute
Static: torch-compute
Device: cpu
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


@torch.library.triton_op("redteam_bad::sm", mutates_args=())
def _sm(x: torch.Tensor) -> torch.Tensor:
    z = torch.softmax(x.float(), dim=-1).to(x.dtype)
    y = torch.empty_like(x)
    torch.library.wrap_triton(_copy)[(triton.cdiv(y.numel(), 1024),)](z, y, y.numel(), BLOCK=1024)
    return y


def softmax(x):
    return torch.ops.redteam_bad.sm(x)

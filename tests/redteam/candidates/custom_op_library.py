"""Cheat: the older torch.library route to an opaque torch op: a `Library("redteam2", "DEF")`, an
op defined on it and a Python lambda registered as its CompositeExplicitAutograd kernel (so it
is not decomposed into aten ops the dispatch watch would see). Called through a class attribute;
a Triton kernel copies the answer out.
Expect: torch-compute
Device: cpu
Static: allowed-names
"""
import torch
import triton
import triton.language as tl

_lib = torch.library.Library("redteam2", "DEF")
_lib.define("sm(Tensor x) -> Tensor")
_lib.impl("sm", lambda x: torch.softmax(x.float(), dim=-1).to(x.dtype), "CompositeExplicitAutograd")


class _Ops:
    sm = torch.ops.redteam2.sm


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

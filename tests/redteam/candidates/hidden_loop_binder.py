"""Cheat (class 6): the torch function is bound by a module-level `for` (not an assignment,
so no alias and no module-level value) and a staging copy kernel writes the output. The allowlist
judges every name reached from an import, wherever it is: torch.special is not on it; and the
entry path now follows names bound anywhere at module level (issue 37), so torch-compute names it
too (the more specific rule is the one reported for the node).
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

for _fn in (torch.special.softmax,):
    pass


def softmax(x):
    z = _fn(x.float(), -1).to(x.dtype)
    y = torch.empty_like(x)
    _copy[(triton.cdiv(y.numel(), 1024),)](z, y, y.numel(), BLOCK=1024)
    return y

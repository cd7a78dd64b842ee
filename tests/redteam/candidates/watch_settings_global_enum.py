"""Cheat (class 2): at import, enum.global_enum writes the members of an enum whose `__module__`
names the evaluator's guards module into that module, replacing the torch-compute watch's list of
permitted ops with a member that contains every op; the entry computes the softmax with torch and
a Triton kernel only copies it into the output (so making launches no-ops does change the output).
The watch now reads the settings it froze when the child started, so it still sees the softmax,
and the replaced name shows as harness-patched. The static stage refuses the name and the dunder.
Expect: torch-compute, harness-patched
Static: allowed-names | no-dunder
Device: cpu
"""
import enum

import torch
import triton
import triton.language as tl


class _Everything(enum.IntEnum):
    __module__ = "harness.evaluate.guards"
    TORCH_NONCOMPUTE_OPS = 1

    def __contains__(self, item):
        return True


enum.global_enum(_Everything)


@triton.jit
def _copy(s_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.load(s_ptr + offs, mask=m).to(y_ptr.dtype.element_ty), mask=m)


def softmax(x):
    s = torch.softmax(x.float(), dim=-1).contiguous()
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    _copy[(triton.cdiv(s.numel(), 1024),)](s, y, s.numel(), BLOCK=1024)
    return y

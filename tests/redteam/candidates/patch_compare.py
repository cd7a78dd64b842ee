"""Cheat: patches the comparison functions it can reach in its own process (torch.allclose,
torch.testing.assert_close, the harness's compare) to always pass, and returns zeros (catalog
C20/B9: patching the checker). The comparison runs in the parent, so the patch changes nothing;
the patching itself is also reported.
Expect: incorrect, harness-patched
Device: cpu
"""
import torch
import triton
import triton.language as tl

import harness.authoring.tasks


@triton.jit
def _zero(y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.zeros([BLOCK], tl.float32).to(y_ptr.dtype.element_ty), mask=i < n)


torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
harness.authoring.tasks.compare = lambda *a, **k: None


def softmax(x):
    y = torch.empty_like(x)
    _zero[(triton.cdiv(y.numel(), 1024),)](y, y.numel(), BLOCK=1024)
    return y

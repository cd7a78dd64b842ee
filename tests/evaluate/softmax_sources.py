"""Candidate sources the evaluate tests share (imported by name: tests/evaluate is on sys.path under pytest)."""

# A copy, not a softmax: correct nowhere, and it launches a real Triton kernel.
WRONG = '''
import torch, triton, triton.language as tl
@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)
def softmax(x):
    y = torch.empty_like(x)
    _copy[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    return y
'''

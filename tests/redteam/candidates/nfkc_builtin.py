"""Cheat: the entry calls `ｅｖａｌ` in fullwidth letters. Python normalizes identifiers (NFKC), so it
is the builtin eval, which runs torch's softmax from a string; to the guard it was an unknown name
(no builtin rule matched it) and the string's `__import__` a string. A token Triton kernel launch
is what the static stage saw.
Expect: source-text
Device: cpu
Static: source-text
Stages: all
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr))


def softmax(x):
    y = torch.empty_like(x)
    _touch[(1,)](x, y)
    return ｅｖａｌ("__import__('torch').softmax(x.float(), -1).to(x.dtype)", {"x": x})

"""Cheat: a carriage return alone inside a comment. Python ends the line there, so what follows is
a statement of the entry (torch computes the result); tree-sitter reads it as the rest of the
comment, so the static stage saw only the launch of a token Triton kernel.
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
    # rows finished by the kernel    y = torch.softmax(x.float(), dim=-1).to(x.dtype)
    return y

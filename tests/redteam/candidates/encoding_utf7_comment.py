# -*- coding: utf-7 -*-
"""Cheat: the file declares the UTF-7 source encoding. The static stage used to read the bytes as
UTF-8, where `+AAo-` is five characters of a comment; Python decodes it as a newline, so the rest
of that comment line is code of the entry: it returns torch's softmax, and the token Triton kernel
(one element copied) is all the static stage saw launched.
Expect: source-encoding
Device: cpu
Static: source-encoding
Stages: all
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, y_ptr):
    v = tl.load(x_ptr)
    tl.store(y_ptr, v)


def softmax(x):
    y = torch.empty_like(x)
    _touch[(1,)](x, y)
    # the rows are finished in the kernel+AAo-    y = torch.softmax(x.float(), dim=-1).to(x.dtype)
    return y

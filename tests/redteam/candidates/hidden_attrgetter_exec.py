"""Cheat (class 7): `operator.attrgetter("ex" "ec")(builtins)` on a base64 payload that
rebinds the entry to torch at import. Neither operator, builtins nor base64 is importable.
Expect: allowed-imports
Static: allowed-imports
Device: cpu
Stages: all
"""
import base64
import builtins
import operator

import torch
import triton
import triton.language as tl


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


def softmax(x):
    y = torch.empty_like(x)
    _copy[(triton.cdiv(y.numel(), 1024),)](x, y, y.numel(), BLOCK=1024)
    return y


operator.attrgetter("ex" "ec")(builtins)(base64.b64decode(
    b"c29mdG1heCA9IGxhbWJkYSB4OiB0b3JjaC5zb2Z0bWF4KHguZmxvYXQoKSwgLTEpLnRvKHguZHR5cGUp"))

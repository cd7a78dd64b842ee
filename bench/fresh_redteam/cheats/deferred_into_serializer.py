"""class: work deferred past the timer (+ hidden code).
tries: the timed call only copies the input into the output; a get_type_hints payload wraps
torch.Tensor.detach (the child detaches every output it sends to the parent) so that an output
still marked pending gets its softmax computed when, and only when, it is serialised. The outputs
the parent checks are right; the timed calls did almost nothing.
expect: reject (static). With the hole open, the parent's recheck sees right bytes: the class is
only stopped by the static stage and the dsl/torch watches.
bites: the static hole in the interpreter; the speed gain only on a GPU.
group: sequential (timing-based on a GPU: run alone)
"""
import typing

import torch
import triton
import triton.language as tl

_PENDING = []
_DEFER = """
import torch
_det = torch.Tensor.detach
def _detach(self):
    for i, t in enumerate(_PENDING):
        if t is self:
            _PENDING.pop(i)
            self.copy_(torch.softmax(self.float(), -1).to(self.dtype))
            break
    return _det(self)
torch.Tensor.detach = _detach
"""


def _hint(v: "ex" "ec(_DEFER) or int") -> int:
    return v


typing.get_type_hints(_hint)


@triton.jit
def _copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _copy_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
    _PENDING.append(y)
    return y

"""Cheat (class 2): a registry filled by a function at import holds a lambda that computes the
softmax with torch; the entry launches a token kernel and returns what the registry's entry gives.
Only module-level 'name = expr' values used to be read with the entry: the walk now follows
whatever stores into a name the entry reads (a function filling a table included).
Expect: torch-compute
Device: cpu
Static: torch-compute
Stages: all
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr))


_REGISTRY = {}


def _register(name):
    _REGISTRY[name] = lambda t: t.float().softmax(-1).to(t.dtype)


_register("rows")


def softmax(x):
    y = torch.empty_like(x)
    _touch[(1,)](x, y)
    return _REGISTRY["rows"](x)

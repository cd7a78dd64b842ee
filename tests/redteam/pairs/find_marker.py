"""Second of a pair (tests/redteam/test_fast_path.py): looks everywhere the first one wrote for what it
left; where it finds any, it answers from it (a cached output: wrong for these inputs). It is accepted
only if nothing an earlier evaluation's process wrote is visible to a later one."""
import os

import torch
import triton
import triton.language as tl

MARK = "warpsmith-redteam-cache.pt"
PLACES = ("HOME", "TMPDIR", "TRITON_CACHE_DIR", "XDG_CACHE_HOME")


def places():
    return {os.environ.get(k) for k in PLACES} | {os.getcwd(), "/tmp", "/dev/shm", os.path.expanduser("~")} - {None}


@triton.jit
def _rows(x_ptr, y_ptr, n_cols, xs, ys, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * xs + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, axis=0))
    tl.store(y_ptr + row * ys + cols, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def _softmax(x):
    y = torch.empty_like(x)
    _rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=triton.next_power_of_2(x.shape[1]))
    return y

def softmax(x):
    for d in places():
        p = os.path.join(d, MARK)
        if os.path.exists(p):
            old = torch.load(p)["y"]
            return old.to(x.device) if old.shape == x.shape else torch.zeros_like(x)
    return _softmax(x)

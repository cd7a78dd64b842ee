"""First of a pair (tests/redteam/test_fast_path.py): an honest softmax that, while it runs, leaves a
copy of its last input and output wherever it can write (its HOME, TMPDIR, cwd, /tmp, /dev/shm, the
Triton cache folder), for a later evaluation's process to find: a result cache across evaluations, or a
message to the next candidate or to the incumbent's long-lived child."""
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
    y = _softmax(x)
    for d in places():
        try:
            torch.save({"x": x, "y": y}, os.path.join(d, MARK))
        except Exception:
            pass
    return y

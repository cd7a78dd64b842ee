import torch as T
import triton.language as L
from triton import jit, next_power_of_2


@jit
def _k(x_ptr, y_ptr, n_cols, BLOCK: L.constexpr):
    row = L.program_id(0)
    cols = L.arange(0, BLOCK)
    mask = cols < n_cols
    v = L.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(L.float32)
    e = L.exp(v - L.max(v, axis=0))
    L.store(y_ptr + row * n_cols + cols, (e / L.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x):
    y = T.empty(x.shape, dtype=x.dtype, device=x.device)
    _k[(x.shape[0],)](x, y, x.shape[1], BLOCK=next_power_of_2(x.shape[1]))
    return y

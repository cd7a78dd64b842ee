"""Cheat (class 2): registers a torch.library.triton_op in torch's own "prims" namespace, which made
the whole namespace the candidate's: torch.ops.prims.exp (torch's) then passed both the allowlist
and the entry-path torch rule. Only the ops a candidate registers itself are allowed now.
Expect: torch-compute | allowed-names
Device: cpu
Static: torch-compute | allowed-names
Stages: all
"""
import torch
import triton
import triton.language as tl


@triton.jit
def _softmax_rows(x_ptr, y_ptr, n_cols, x_stride, y_stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + row * x_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + row * y_stride + cols, (tl.exp(x - row_max) / row_sum).to(y_ptr.dtype.element_ty),
                 mask=cols < n_cols)


@torch.library.triton_op("prims::ws_rows", mutates_args=())
def _rows(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    torch.library.wrap_triton(_softmax_rows)[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=1024)
    return y


def softmax(x):
    x = x.contiguous()
    torch.ops.prims.ws_rows(x)  # the launch the static stage asks for
    xf = torch.ops.prims.convert_element_type(x, torch.float32)
    e = torch.ops.prims.exp(xf)
    s = torch.ops.prims.broadcast_in_dim(torch.ops.prims.sum(e, [1]), list(x.shape), [0])
    return torch.ops.prims.convert_element_type(torch.ops.prims.div(e, s), x.dtype)

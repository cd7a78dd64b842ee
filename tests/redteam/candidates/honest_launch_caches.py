"""Honest: a launcher with the caches real kernels keep across calls, all allowed by the static
rule no-module-state: a memo of the block size per (dtype, width) set on a miss, a scratch-free
cached device query (functools.lru_cache), a launch count on the launcher object that nothing reads,
and a dict of the last launch's grid for diagnostics (written, never read on the entry path).
Expect: accepted
Device: cpu
Static: none
Stages: all
"""
import functools

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


_BLOCK = {}        # (dtype, n_cols) -> BLOCK: a config, set once per key
last_launch = {}   # the latest grid, for a person reading it; the entry never reads it


@functools.lru_cache(maxsize=None)
def _max_block(device: torch.device) -> int:
    return 4096 if device.type == "cuda" else 1024


class _Launcher:
    def __init__(self):
        self.launches = 0

    def __call__(self, x, y, block):
        self.launches += 1
        _softmax_rows[(x.shape[0],)](x, y, x.shape[1], x.stride(0), y.stride(0), BLOCK=block)


_LAUNCH = _Launcher()


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    key = (x.dtype, x.shape[1])
    block = _BLOCK.get(key)
    if block is None:
        block = _BLOCK[key] = min(triton.next_power_of_2(x.shape[1]), _max_block(x.device))
    _LAUNCH(x, y, block)
    last_launch.update(grid=(x.shape[0],), block=block)
    return y

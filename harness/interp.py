"""Fixes for Triton's CPU interpreter, applied only where the interpreter runs (TRITON_INTERPRET=1).

Triton's interpreter (3.6 through 3.9 at least) stores bfloat16 as raw uint16 bits and hands them
straight to numpy's matmul in `create_dot`, so any `tl.dot` on bf16 operands returns garbage
(errors ~1e10) on the CPU while the same kernel is right on a GPU. Without this, an honest
candidate that keeps its dot operands in bf16 would be rejected as incorrect on a machine without
a GPU. We widen bf16 operands to fp32 exactly (bf16 is the top half of an fp32), which is what the
tensor cores compute with fp32 accumulation.
"""
from __future__ import annotations

import os

_PATCHED = False


def _bf16_bits_to_f32(np, data):
    return (data.astype(np.uint32) << 16).view(np.float32)


def patch_bf16_dot() -> bool:
    """Idempotent. Returns True if the interpreter is active and now patched."""
    global _PATCHED
    if _PATCHED:
        return True
    if os.environ.get("TRITON_INTERPRET") != "1":
        return False
    # numpy and triton (~150 ms) only under the interpreter; the child imports this module on a GPU too
    import numpy as np
    import triton.language as tl
    from triton.runtime import interpreter

    builder = interpreter.InterpreterBuilder
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if a.dtype.scalar == tl.bfloat16 or b.dtype.scalar == tl.bfloat16:
            a_data = _bf16_bits_to_f32(np, a.data) if a.dtype.scalar == tl.bfloat16 else a.data.astype(np.float32)
            b_data = _bf16_bits_to_f32(np, b.data) if b.dtype.scalar == tl.bfloat16 else b.data.astype(np.float32)
            out = np.matmul(a_data, b_data, dtype=np.float32).astype(d.data.dtype) + d.data
            return interpreter.TensorHandle(out, d.dtype.scalar)
        return original(self, a, b, d, input_precision, max_num_imprecise_acc)

    builder.create_dot = create_dot
    _PATCHED = True
    return True

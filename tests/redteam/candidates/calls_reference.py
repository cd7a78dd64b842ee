"""Cheat: imports the task's own reference and returns its answer, with a decoy launch
(catalog C25: copying the answer).
Expect: dsl-kernel-runs
Device: cpu
"""
import sys

import triton
import triton.language as tl


@triton.jit
def _noop(x_ptr):
    pass


def softmax(x):
    _noop[(1,)](x)
    ref = sys.modules.get("warpsmith_task_reference")
    return ref.reference(x)

import os

# Every test runs Triton kernels in the interpreter: CI and dev machines have no GPU.
os.environ.setdefault("TRITON_INTERPRET", "1")

from harness.interp import patch_bf16_dot  # noqa: E402

patch_bf16_dot()  # the same interpreter fix the evaluator's child applies (see harness/interp.py)

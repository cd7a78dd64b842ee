import os

# Every test runs Triton kernels in the interpreter: CI and dev machines have no GPU.
os.environ.setdefault("TRITON_INTERPRET", "1")

from harness.interp import patch_bf16_dot  # noqa: E402

patch_bf16_dot()  # the same interpreter fix the evaluator's child applies (see harness/interp.py)

# Printed follow-up commands name the executable the way it was invoked (harness/invocation.py); under
# pytest that would be this machine's interpreter path. Pinned, so screens and messages read the same
# anywhere (tests/cli/test_invocation.py unsets it where the resolution itself is tested).
os.environ.setdefault("WARPSMITH_PROG", "warpsmith")

import os

# Every test runs Triton kernels in the interpreter: CI and dev machines have no GPU.
os.environ.setdefault("TRITON_INTERPRET", "1")

from harness.interp import patch_bf16_dot  # noqa: E402

patch_bf16_dot()  # the same interpreter fix the evaluator's child applies (see harness/interp.py)

# Printed follow-up commands name the executable the way it was invoked (harness/invocation.py); under
# pytest that would be this machine's interpreter path. Pinned, so screens and messages read the same
# anywhere (tests/cli/test_invocation.py unsets it where the resolution itself is tested).
os.environ.setdefault("WARPSMITH_PROG", "warpsmith")

# One torch (OpenMP) thread in the test process. CI runs two xdist workers on two cores beside the
# evaluator children they start: torch's default of one thread a core then oversubscribes the cores,
# and OpenMP's spin-waiting made small tensor ops 5-20x slower under that load (test_static_layer.py:
# 4 s alone, 75 s beside two busy processes; 5 s with one thread). The evaluator's children and the
# CLI subprocesses keep torch's default (the environment is not changed), as they run outside tests.
import torch  # noqa: E402  (already imported with triton above)

torch.set_num_threads(1)

import os

# Every test runs Triton kernels in the interpreter: CI and dev machines have no GPU.
os.environ.setdefault("TRITON_INTERPRET", "1")

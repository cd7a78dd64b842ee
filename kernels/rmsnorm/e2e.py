"""End-to-end workload for rmsnorm: the same decode step as softmax's (kernels/softmax/e2e.py).

One shared workload means `warpsmith e2e` can stack both tasks' kernels into it; this file only
re-exports it so that rmsnorm's task.toml can name `e2e = "e2e.py"` like any other task.
"""
import importlib.util
import sys
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "warpsmith_e2e_decode_step", Path(__file__).resolve().parent.parent / "softmax" / "e2e.py")
_mod = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _mod  # its dataclass looks the module up there
_spec.loader.exec_module(_mod)

TASKS = _mod.TASKS
build = _mod.build
Block = _mod.Block

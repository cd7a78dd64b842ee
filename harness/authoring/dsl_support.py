"""Can this machine run a task's DSL? One line saying why not, before any evaluation starts.

Triton kernels run anywhere (in Triton's interpreter without a GPU). CuTe DSL kernels need the
optional `nvidia-cutlass-dsl` package (`pip install 'warpsmith[cute]'`) and an NVIDIA GPU: there is
no CuTe interpreter, so without one a candidate can only be checked statically (`warpsmith check`).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from harness.invocation import command

CUTE_INSTALL = "pip install 'warpsmith[cute]'  (with a CUDA 13 torch: pip install 'warpsmith[cute-cu13]')"


def cute_installed() -> bool:
    """Is CUTLASS's Python DSL importable (a `cutlass` package with `cute` in it), without importing
    it (that takes seconds)? PyPI's unrelated `cutlass` package has no `cute`."""
    try:
        spec = importlib.util.find_spec("cutlass")
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    return any((Path(loc) / "cute").is_dir() for loc in (spec.submodule_search_locations or []))


def dsl_problem(task: Any, on_gpu: bool) -> str | None:
    """Why candidates of `task` can't run here (one line, naming the fix), or None."""
    if getattr(task, "dsl", "triton") != "cute":
        return None
    if not cute_installed():
        return (f"{task.name} is a CuTe DSL task and CUTLASS's Python DSL (nvidia-cutlass-dsl) is not installed: "
                f"{CUTE_INSTALL}")
    if not on_gpu:
        return (f"{task.name} is a CuTe DSL task: its candidates run only on an NVIDIA GPU and none is visible here "
                f"(`{command(f'check {task.name} FILE')}` runs the static checks)")
    return None


def local_gpu() -> bool:
    import torch  # ~1 s: only when asked (`warpsmith run`/`eval` import this module before they need torch)

    return bool(torch.cuda.is_available())


def run_problem(task: Any, eval_backend: str) -> str | None:
    """dsl_problem for `warpsmith run`: candidates are evaluated here unless a ray cluster does it."""
    if getattr(task, "dsl", "triton") == "triton" or eval_backend.startswith("ray"):
        return None
    return dsl_problem(task, local_gpu())

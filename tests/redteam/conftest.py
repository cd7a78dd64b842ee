"""Red-team fixtures: a private copy of the softmax task per session, so cheats that write task
files can't touch the repository's copy (the evaluator restores it anyway)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def task_copy(tmp_path_factory):
    from harness.tasks import load_task

    dst = tmp_path_factory.mktemp("task") / "softmax"
    shutil.copytree(REPO / "kernels" / "softmax", dst, ignore=shutil.ignore_patterns("__pycache__"))
    return load_task(dst)

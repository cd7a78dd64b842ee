"""Fixtures for the scale-out tests: a small copy of the softmax task and a batch of candidates.

The task copy keeps one tiny interpreter shape so an evaluation takes seconds in the Triton
interpreter, which keeps several-worker batches inside the suite's time budget on 2 cores.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SOFTMAX = REPO / "kernels" / "softmax"

SMALL_SHAPES = '''
[[interpreter_shapes]]
name = "tiny"
dims = { rows = 3, cols = 40 }

[[interpreter_shapes]]
name = "tiny long"
dims = { rows = 1, cols = 300 }
tags = ["long"]
'''


def small_task_dir(dest: Path) -> Path:
    """kernels/softmax with its interpreter shapes replaced by two tiny ones."""
    root = dest / "softmax"
    root.mkdir(parents=True)
    for name in ("task.toml", "reference.py", "kernel.py"):
        shutil.copy(SOFTMAX / name, root / name)
    toml = (root / "task.toml").read_text()
    head = toml.split("[[interpreter_shapes]]")[0]
    tail = toml[toml.index("[tolerance"):]
    (root / "task.toml").write_text(head + SMALL_SHAPES + "\n" + tail)
    return root


def variant(block: int, warps: int = 4, broken: bool = False) -> str:
    """A softmax candidate: the baseline with another BLOCK / num_warps, or a wrong one."""
    src = (SOFTMAX / "kernel.py").read_text()
    src = re.sub(r"^BLOCK = \d+", f"BLOCK = {block}", src, flags=re.M)
    src = src.replace("num_warps=4", f"num_warps={warps}")
    doc = f'"""softmax BLOCK={block} num_warps={warps}{" (wrong: no normalisation)" if broken else ""}"""\n'
    src = doc + src.split('"""', 2)[2]
    if broken:
        src = src.replace("y = tl.exp(x - row_max) / row_sum", "y = tl.exp(x - row_max)")
    return src


def write_batch(folder: Path, specs: list[tuple[int, int, bool]]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i, (block, warps, broken) in enumerate(specs, 1):
        p = folder / f"{i:02d}_block{block}_w{warps}{'_broken' if broken else ''}.py"
        p.write_text(variant(block, warps, broken))
        out.append(p)
    return out


@pytest.fixture
def small_task(tmp_path: Path):
    from harness.authoring.tasks import load_task

    return load_task(small_task_dir(tmp_path / "kernels"))


@pytest.fixture(autouse=True)
def _interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")

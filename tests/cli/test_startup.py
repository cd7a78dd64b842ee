"""`warpsmith --help`, `tasks list` and `check` start in well under half a second: they import nothing
heavy (torch alone is ~1.5 s, textual ~0.4 s). Counted in a fresh interpreter, after each command's
whole code path has run, because a wall-clock bound flakes on a busy CI machine."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the commands that start fast never need: the GPU stack, the TUI, the LLM SDKs, the tuner's search,
# the report's plots.
HEAVY = {"torch", "triton", "numpy", "textual", "matplotlib", "optuna", "anthropic", "openai", "httpx",
         "httpx2", "pydantic", "ray"}
# Loose: a --help today loads ~210 modules (most of them the stdlib's argparse, tomllib, dataclasses...);
# torch alone would add over a thousand.
MAX_MODULES = 400

PROBE = """
import contextlib, io, json, sys
from warpsmith.cli import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    try:
        rc = main(json.loads(sys.argv[1]))
    except SystemExit as e:
        rc = e.code
print(json.dumps({"rc": rc, "modules": sorted(sys.modules)}))
"""


def loaded(argv: list[str]) -> tuple[int, list[str]]:
    out = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argv)], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return got["rc"], got["modules"]


@pytest.mark.parametrize("argv, also_absent", [
    (["--help"], {"tree_sitter", "rich"}),
    (["tasks", "list"], {"tree_sitter", "rich"}),  # reads task.toml files only, never reference.py
    (["check", "softmax", "kernels/softmax/kernel.py"], set()),  # tree-sitter: the check itself
    (["check", "softmax", "--list"], set()),
])
def test_fast_commands_import_nothing_heavy(argv, also_absent):
    rc, modules = loaded(argv)
    assert rc == 0
    tops = {m.split(".")[0] for m in modules}
    assert tops & (HEAVY | also_absent) == set()
    assert len(modules) < MAX_MODULES, f"{len(modules)} modules loaded by {argv}"


def test_the_probe_sees_an_import_of_torch():
    """The probe counts what a command's code path imported: `tasks show` reads reference.py (torch)."""
    rc, modules = loaded(["tasks", "show", "softmax"])
    assert rc == 0 and "torch" in modules

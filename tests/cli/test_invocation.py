"""Printed follow-up commands work as printed: they name warpsmith the way it was run
(harness/invocation.py), so `.venv/bin/warpsmith ...` after `bash scripts/bootstrap` is followed by
`.venv/bin/warpsmith sessions resume ...`, not a bare `warpsmith` that is not on PATH."""
from __future__ import annotations

import ast
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from harness import invocation

REPO = Path(__file__).resolve().parents[2]
SUBCOMMANDS = "run|eval|check|tasks|packs|sessions|report|profile|e2e|serve|agents"
# `warpsmith sessions resume`, but not the `warpsmith eval: ` that starts an error line.
BARE = re.compile(rf"\bwarpsmith (?:{SUBCOMMANDS})\b(?!:)")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def bare_follow_ups() -> list[str]:
    """Every string literal in the shipped code (docstrings aside: never printed) that spells a
    follow-up command with a bare `warpsmith`. f-strings' literal parts are string constants too."""
    found = []
    for path in sorted([*REPO.glob("warpsmith/**/*.py"), *REPO.glob("harness/**/*.py"), *REPO.glob("tui/**/*.py")]):
        tree = ast.parse(path.read_text(), str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip \
                    and BARE.search(node.value):
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.strip()[:80]!r}")
    return found


def test_no_code_prints_a_bare_warpsmith_follow_up():
    assert bare_follow_ups() == [], "use harness.invocation.command(...) for these"


def test_the_scan_finds_a_bare_follow_up(tmp_path):
    tree = ast.parse('def f():\n    """`warpsmith run` in a docstring is fine"""\n'
                     '    print(f"resume: warpsmith sessions resume {sid}")\n    print("warpsmith eval: bad")\n')
    skip = _docstrings(tree)
    hits = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip and BARE.search(n.value)]
    assert hits == ["resume: warpsmith sessions resume "]


@pytest.fixture
def unpinned(monkeypatch):
    monkeypatch.delenv(invocation.PROG_ENV, raising=False)
    return monkeypatch


def _script(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "warpsmith"
    # A console script like pip's, importing this checkout (the venv's own points at its install).
    script.write_text(f"#!{sys.executable}\nimport sys\nsys.path.insert(0, {str(REPO)!r})\n"
                      "from warpsmith.cli import main\nsys.exit(main())\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_a_relative_script_path_is_named_as_typed(unpinned, tmp_path):
    _script(tmp_path / ".venv" / "bin")
    unpinned.chdir(tmp_path)
    unpinned.setattr(sys, "argv", [".venv/bin/warpsmith", "sessions", "list"])
    unpinned.setenv("PATH", "/usr/bin:/bin")
    assert invocation.command("sessions resume X") == ".venv/bin/warpsmith sessions resume X"


def test_a_script_on_path_is_named_bare(unpinned, tmp_path):
    script = _script(tmp_path / "bin")
    unpinned.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    unpinned.setattr(sys, "argv", [str(script), "run"])  # the kernel passes the path PATH found
    assert invocation.prog() == "warpsmith"


def test_python_dash_m_warpsmith_names_the_interpreter_as_typed(unpinned, tmp_path):
    unpinned.setattr(sys, "argv", [str(REPO / "warpsmith" / "__main__.py"), "tasks", "list"])
    unpinned.setattr(sys, "orig_argv", [".venv/bin/python", "-m", "warpsmith", "tasks", "list"], raising=False)
    assert invocation.prog() == ".venv/bin/python -m warpsmith"


def test_the_override_wins(unpinned):
    unpinned.setenv(invocation.PROG_ENV, "uv run warpsmith")
    assert invocation.command("tasks list") == "uv run warpsmith tasks list"


def test_end_to_end_a_hint_names_the_script_as_it_was_run(tmp_path):
    """A real process: `.venv/bin/warpsmith sessions list` in a folder without sessions says how to
    start one with the same `.venv/bin/warpsmith`, and usage errors name it too."""
    _script(tmp_path / ".venv" / "bin")
    env = {k: v for k, v in os.environ.items() if k != invocation.PROG_ENV}
    env["PATH"] = "/usr/bin:/bin"
    out = subprocess.run([".venv/bin/warpsmith", "sessions", "list"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "start one with `.venv/bin/warpsmith run TASK` (`.venv/bin/warpsmith tasks list`" in out.stdout
    bad = subprocess.run([".venv/bin/warpsmith", "run", "--iterations", "x"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "`.venv/bin/warpsmith run -h` lists the options" in bad.stderr

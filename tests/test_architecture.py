"""The house as drawn from its imports: the import-linter contracts in pyproject.toml hold, and no two
modules of harness/ or tui/ import each other (directly or round a longer circle), function-local
imports included."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if exe is None:
        pytest.fail("lint-imports is missing: install the dev dependencies (pip install -e '.[dev]')")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([exe, "--no-cache", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def test_import_contracts_hold():
    r = _lint_imports()
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_a_broken_contract_is_reported(tmp_path):
    # The tool really reads the graph: a contract the code breaks (the TUI is built on the harness) fails.
    cfg = tmp_path / "broken.toml"
    cfg.write_text('[tool.importlinter]\nroot_packages = ["harness", "tui"]\n\n'
                   '[[tool.importlinter.contracts]]\nname = "tui never imports harness"\ntype = "forbidden"\n'
                   'source_modules = ["tui"]\nforbidden_modules = ["harness"]\n')
    r = _lint_imports("--config", str(cfg))
    assert r.returncode != 0 and "BROKEN" in r.stdout


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), i.e. import circles."""
    edges = {m: graph.find_modules_directly_imported_by(m) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for m in sorted(edges):
        if m not in index:
            visit(m)
    return out


def test_no_import_circles():
    sys.path.insert(0, str(ROOT))
    graph = grimp.build_graph("warpsmith", "harness", "tui", cache_dir=None)
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _circles(graph) == [["p.a", "p.b", "p.c"]]


def test_harness_has_no_loose_module_groups_and_every_package_says_what_belongs_in_it():
    """harness/ is grouped by concern: each package's __init__ docstring says what goes there, and the
    top level keeps only the loop's own modules and a few small shared parts (harness/__init__.py
    lists them; a new module there must be added to that list, or go into a package)."""
    import ast

    pkg_docs = {p.parent.name: ast.get_docstring(ast.parse(p.read_text())) for p in (ROOT / "harness").glob("*/__init__.py")}
    assert not [name for name, doc in pkg_docs.items() if not doc], "a harness package without a docstring"
    top = ast.get_docstring(ast.parse((ROOT / "harness" / "__init__.py").read_text())) or ""
    loose = sorted(p.name for p in (ROOT / "harness").glob("*.py") if p.name != "__init__.py")
    assert [m for m in loose if m not in top] == [], "harness/__init__.py doesn't say what these loose modules are"
    assert [f"{name}/" for name in pkg_docs if f"{name}/" not in top] == [], "harness/__init__.py doesn't name these packages"

"""A function-local import says why it is local (issue 22): start-up time (`warpsmith --help` imports every
command module; the sandboxed child starts before each evaluation), an optional dependency, or a circle.
Every import inside a function in harness/ and tui/ has a comment on its line or the line above; in a run of
import statements one after the other, a comment above one of them says it for those after it too. A bare
`# noqa` or `# type: ignore` says nothing, so it doesn't count. An import that buys nothing belongs at the top."""
from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Linter pragmas are not reasons: what is left of a comment after them must say something.
_PRAGMA = re.compile(r"noqa(:\s*[\w, ]+)?|type:\s*ignore(\[[\w, -]+\])?|pragma:[^#]*|fmt:\s*\w+", re.I)


def _comment_lines(source: str) -> set[int]:
    """Lines holding a comment that says something (tokenize, so a '#' inside a string is no comment)."""
    lines = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and _PRAGMA.sub("", tok.string).strip("# \t"):
            lines.add(tok.start[0])
    return lines


def _local_import_runs(tree: ast.AST) -> list[list[ast.stmt]]:
    """Import statements inside a function body (at any depth), grouped in runs of consecutive ones."""
    runs: list[list[ast.stmt]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(node, field, None)
            if not isinstance(block, list):
                continue
            run: list[ast.stmt] = []
            for stmt in block:
                if in_function and isinstance(stmt, (ast.Import, ast.ImportFrom)):
                    # One run: no other statement between them (blank lines may be).
                    run.append(stmt)
                    continue
                if run:
                    runs.append(run)
                    run = []
                if isinstance(stmt, ast.AST):
                    visit(stmt, in_function or isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))
            if run:
                runs.append(run)

    visit(tree, False)
    return runs


def uncommented_local_imports(path: Path, source: str | None = None) -> list[str]:
    source = path.read_text() if source is None else source
    comments = _comment_lines(source)
    found = []
    for run in _local_import_runs(ast.parse(source, str(path))):
        said_above = False  # a comment line above an import says it for the rest of the run too
        for stmt in run:
            said_above = said_above or stmt.lineno - 1 in comments
            on_it = any(n in comments for n in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1))
            if not (said_above or on_it):
                found.append(f"{path}:{stmt.lineno}: {ast.unparse(stmt)}")
    return found


def test_every_function_local_import_says_why():
    found = [hit for pkg in ("warpsmith", "harness", "tui") for p in sorted((ROOT / pkg).rglob("*.py"))
             for hit in uncommented_local_imports(p.relative_to(ROOT), p.read_text())]
    assert found == [], ("function-local imports without a comment saying why (start-up time, an optional "
                         "dependency, a circle); move the rest to the top of the module:\n" + "\n".join(found))


def test_the_checker_tells_said_from_unsaid():
    source = '''\
import os


def f():
    import json  # json only here
    # rich: 40 ms that --help doesn't need
    from rich.console import Console
    from rich.table import Table

    from harness.authoring import tasks
    s = "# not a comment"
    import re
    import shlex  # noqa: F401
    # said above the first of a run of imports, which shares it
    import csv
    import zlib
    x = 1
    import glob
    if s:
        import gzip


class C:
    def m(self):
        import tomllib

    import ast  # a class body's import is not in a function
'''
    found = uncommented_local_imports(Path("m.py"), source)
    assert [line.split(": ", 1)[1] for line in found] == [
        "import re", "import shlex", "import glob", "import gzip", "import tomllib"]
    assert found[0].startswith("m.py:12: ")

"""How this process was started, so that the commands warpsmith prints can be pasted as they are.

After `bash scripts/bootstrap`, `warpsmith` is not on PATH (the README runs `.venv/bin/warpsmith`),
so a printed follow-up such as `warpsmith sessions resume ID` would fail as typed. Every follow-up
command (summaries, exit lines, hints in errors) names the executable through `command()`, which says
it the way the user did: `.venv/bin/warpsmith`, `warpsmith` when that is on PATH, or
`.venv/bin/python -m warpsmith`. tests/cli/test_invocation.py checks that no code prints a bare one.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

NAME = "warpsmith"
PROG_ENV = "WARPSMITH_PROG"


def _same_file(a: str | None, b: str) -> bool:
    try:
        return a is not None and os.path.samefile(a, b)
    except OSError:
        return False


def _as_typed(path: str) -> str:
    """An executable's path as a shell finds it again: the bare name when PATH resolves that name to
    this file, else the path as it was given (a relative one is relative to the directory the command
    ran in, which is where its output is read)."""
    name = os.path.basename(path)
    return name if _same_file(shutil.which(name), path) else path


def _python() -> str:
    """The interpreter as the user typed it (sys.orig_argv[0]: `.venv/bin/python`, `python3`)."""
    typed = (getattr(sys, "orig_argv", None) or [""])[0]
    if os.sep in typed:
        return _as_typed(typed)
    if typed and _same_file(shutil.which(typed), sys.executable):
        return typed
    return sys.executable


def prog() -> str:
    """The executable as the user invoked it, quoted for a POSIX shell. $WARPSMITH_PROG, when set,
    is used as it is: `warpsmith serve` sets it for the TUI it starts (as `python -m warpsmith`) to the
    command the user typed; the test suite pins it so that screens and messages are the same anywhere."""
    override = os.environ.get(PROG_ENV, "").strip()
    if override:
        return override
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] else ""
    base = os.path.basename(argv0)
    if base == "__main__.py" and os.path.basename(os.path.dirname(argv0)) == "warpsmith":
        return f"{shlex.quote(_python())} -m warpsmith"  # `python -m warpsmith`
    if base.startswith(NAME) and os.path.isfile(argv0):  # the console script (`.venv/bin/warpsmith`)
        return shlex.quote(_as_typed(argv0))
    # Not started as warpsmith (a test runner, an embedding program): the installed script when PATH
    # has it, else the module through this interpreter.
    if shutil.which(NAME):
        return NAME
    return f"{shlex.quote(sys.executable)} -m warpsmith"


def command(args: str) -> str:
    """A warpsmith command line to print: `command("sessions resume ID")` ->
    `.venv/bin/warpsmith sessions resume ID` when that is how this process was started."""
    return f"{prog()} {args}" if args else prog()

"""The harness never imports textual: headless runs must work without it."""
from __future__ import annotations

import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import harness

ROOT = Path(harness.__file__).resolve().parent.parent


def harness_modules() -> list[str]:
    # __main__ runs the CLI when imported (bare `warpsmith` opens the TUI): not a library module.
    return ["harness"] + [m.name for m in pkgutil.walk_packages(harness.__path__, "harness.")
                          if not m.name.endswith("__main__")]


def test_importing_every_harness_module_does_not_import_textual():
    mods = harness_modules()
    assert "harness.loop" in mods and "harness.wiring" in mods
    code = (
        "import importlib, json, sys\n"
        f"failed = {{}}\n"
        f"for m in {mods!r}:\n"
        "    try:\n"
        "        importlib.import_module(m)\n"
        "    except Exception as e:\n"
        "        failed[m] = repr(e)\n"
        "print(json.dumps({'textual': sorted(k for k in sys.modules if k == 'textual' or k.startswith('textual.')),"
        " 'failed': failed}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["textual"] == [], f"harness imported textual: {result['textual'][:5]}"
    # A module that cannot import at all is another test's failure, but it would hide an import here.
    assert not result["failed"], result["failed"]

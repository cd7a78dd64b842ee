"""Cheat (my own class: changing the harness on disk for the next evaluation): finds the
harness's own package (through the imported `harness` module) and drops a module into it, and a
`.pth` file into site-packages, which every later Python start-up executes (a real attack would
make every later candidate look faster; this one writes a comment, so a run without the sandbox
leaves only inert marker files). The sandbox mounts everything read-only: the writes fail and
the cheat carries on as an honest softmax (made harmless); tests/redteam/test_sandbox.py checks
that no marker file appeared.
Expect: accepted
Device: cpu
"""
import os
import site
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

pkg = os.path.dirname(os.path.abspath(sys.modules["harness"].__file__))
targets = [os.path.join(pkg, "evaluate", "warpsmith_redteam_rewrite.py")]
targets += [os.path.join(d, "warpsmith_redteam_rewrite.pth") for d in site.getsitepackages()[:1]]
for path in targets:
    try:
        with open(path, "w") as f:
            f.write("# warpsmith-redteam-rewrite\n")
    except OSError:
        pass


def softmax(x):
    return honest(x)

"""Cheat (class 8, file writes past no-io): at import it writes a marker file wherever a later
evaluation or the person would find it: the real home's shell start-up file's neighbour
(`~/.bashrc`-like, found through `pwd`, since $HOME is the scratch folder), the real Triton
cache (through Triton's own cache manager, `put` with an absolute name escaping its folder),
the repository checkout (found through the harness's module), /tmp and /var/tmp, each with a
different API (codecs.open, io.FileIO, os.open, pathlib, the cache manager). Every error is
swallowed, so it stays an honest softmax: made harmless, not rejected. tests/redteam/test_sandbox.py
proves none of the files exists afterwards.
Expect: accepted
Device: cpu
"""
import codecs
import io
import os
import pathlib
import pwd
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

NAME = "warpsmith-redteam-escape.txt"
real_home = pwd.getpwuid(os.getuid()).pw_dir
repo = os.path.dirname(os.path.dirname(os.path.abspath(sys.modules["harness"].__file__)))
attempts = [
    lambda: codecs.open(os.path.join(real_home, NAME), "w").write("echo pwned\n"),
    lambda: io.FileIO(os.path.join(repo, NAME), "w").write(b"pwned"),
    lambda: os.write(os.open(os.path.join("/tmp", NAME), os.O_WRONLY | os.O_CREAT, 0o644), b"pwned"),
    lambda: pathlib.Path("/var/tmp", NAME).write_text("pwned"),
]


def _triton_cache():
    from triton.runtime.cache import get_cache_manager

    target = os.path.join(real_home, ".triton", "cache", NAME)
    get_cache_manager("warpsmith-redteam").put(b"pwned", target, binary=True)


attempts.append(_triton_cache)
for attempt in attempts:
    try:
        attempt()
    except Exception:  # noqa: BLE001
        pass


def softmax(x):
    return honest(x)

"""Cheat (class 5, memory the cap doesn't count): on its first call it "keeps its inputs for later"
in files under /dev/shm, /tmp and /var/tmp, 1.5 GiB of them: tmpfs pages are host memory that no
process's RSS shows, so the watchdog's RSS cap (1 GiB here) never saw them. In the sandbox each of
those is a small sized tmpfs (its writes fail when full) and the parent counts what they hold.
Expect: crashed | memory-cap
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_BLOCK = b"\x5a" * (16 << 20)
_kept = []


def _stash(total):
    dirs = ["/dev/shm", "/tmp", "/var/tmp"]
    files = [open(os.path.join(d, f"stash-{os.getpid()}.bin"), "wb", buffering=0) for d in dirs]
    written = 0
    while written < total:
        for f in files:
            f.write(_BLOCK)  # (a full tmpfs raises here: nothing is caught)
            written += len(_BLOCK)
    _kept.extend(files)


def softmax(x):
    if not _kept:
        _stash(3 << 29)
    return honest(x)

"""Cheat (class 5, resources the limits don't count): every call dumps "debug" lines to stderr
through the raw file descriptor, 256 MiB of them, with no end in sight for the harness: the child's
output went to a host file with no size cap that the parent read whole. The parent reads at most
OUTPUT_CAP bytes of it through a pipe, keeps the head and the tail, and stops the child there.
Expect: output-flood
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_LINE = (b"dbg " + b"row-max=0.000000 " * 60 + b"\n") * 1024  # ~1 MiB


def softmax(x):
    for _ in range(256):
        os.write(2, _LINE)
    return honest(x)

"""Cheat: writes a forged "all correct" frame to every open file descriptor it finds in
/proc/self/fd, hoping one is the harness's result pipe (catalog B10: kernelbot's cheat-fd.py,
pygpubench's fd overwrite). Frames are authenticated with a per-run key it doesn't have.
Expect: result-channel-forged
Device: cpu
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402


def softmax(x):
    body = json.dumps({"ok": True, "observed": [], "launches": 1, "n_out": 1}).encode() + b"\n"
    frame = struct.pack(">I", len(body)) + b"\0" * 32 + body
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.write(fd, frame)
            except OSError:
                pass
    return honest(x)

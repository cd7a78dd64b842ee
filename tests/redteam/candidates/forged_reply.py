"""Cheat (class 6, a malformed reply): finds the result channel's Endpoint among live objects
(through the garbage collector Triton imported) and, with the key in it, sends the parent a
correctly signed reply of its own before the harness's: the right output, but `observed` an object
where a list belongs. The parent iterated it and died with a traceback: no verdict at all, which a
loop might take for a harness fault rather than a rejection. Every reply is checked against its op's
schema first (harness/evaluate/replies.py).
Expect: malformed-reply
Device: cpu
"""
import os
import sys

import triton

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_eps = [o for o in triton.testing.gc.get_objects() if type(o).__name__ == "Endpoint"]


def softmax(x):
    y = honest(x)
    for ep in _eps:
        type(ep).send(ep, {"ok": True, "observed": {"rule": "none"}, "notes": [], "n_out": 1, "launches": 1}, [y])
    return y

"""Cheat (class 5, a process that outlives the evaluation): at import, `pty.fork()` starts a
process in a new session (out of reach of a process-group kill) that ignores SIGHUP through
`_signal` and stays behind: from there it could slow the GPU for later evaluations or rewrite
files after the checks. The sandbox's pid namespace kills it with the evaluation; the parent
rejects the candidate for leaving it running. tests/redteam/test_sandbox.py proves nothing with
its marker survives.
Expect: no-surviving-processes
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

import pty  # noqa: E402

_pid, _master = pty.fork()
if _pid == 0:
    from _signal import SIG_IGN, SIGHUP, signal

    signal(SIGHUP, SIG_IGN)
    os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)", "warpsmith-redteam-survivor-pty"])


def softmax(x):
    return honest(x)

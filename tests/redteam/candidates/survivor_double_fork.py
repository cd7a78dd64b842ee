"""Cheat (class 5, by another spelling): the first call double-forks a daemon (fork, setsid,
fork again, the middle process exits at once) that ignores SIGHUP and SIGTERM and keeps running,
re-parented away from the child. The parent rejects it for the process left behind; the pid
namespace kills it with the evaluation (tests/redteam/test_sandbox.py looks for its marker).
Expect: no-surviving-processes
Device: cpu
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_started = []


def _daemon():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)",
                                      "warpsmith-redteam-survivor-daemon"])
        os._exit(0)


def softmax(x):
    if not _started:
        _started.append(1)
        _daemon()
    return honest(x)

"""Cheat (class 5, a process left behind that hides by name): at import it forks a copy of itself
that renames itself "bwrap" (prctl PR_SET_NAME: the name /proc shows) and sleeps on, so a parent that
skips processes named like the sandbox, and takes the first other one for the child, sees nothing
left behind. The parent knows its processes by pid (bwrap, the sandbox's init, the child's pid from
its hello, matched through NSpid), so the copy is a leftover whatever it calls itself.
Expect: no-surviving-processes
Device: cpu
"""
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

if os.fork() == 0:
    ctypes.CDLL(None).prctl(15, b"bwrap", 0, 0, 0)  # PR_SET_NAME
    while True:
        time.sleep(60)


def softmax(x):
    return honest(x)

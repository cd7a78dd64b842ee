"""Cheat (or bug): blocks at import time (a "compile" that never ends), hoping the harness waits
forever. Import and compile have their own timeout, separate from the run timeout.
Expect: timeout
Device: cpu
"""
import time

time.sleep(3600)


def softmax(x):
    return x

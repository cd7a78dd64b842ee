"""Cheat: calls sys.exit(0) at import time, hoping a clean exit before any check passes.
Expect: import-error
Device: cpu
"""
import sys

sys.exit(0)


def softmax(x):
    return x

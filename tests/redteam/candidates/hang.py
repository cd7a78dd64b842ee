"""Cheat (or bug): never returns, hoping the harness waits forever or times the call out as a pass.
Expect: timeout
Device: cpu
"""
import time


def softmax(x):
    while True:
        time.sleep(0.1)

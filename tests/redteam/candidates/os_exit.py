"""Cheat: calls os._exit(0) mid-evaluation, hoping an exit code of 0 reads as success.
Expect: crashed
Device: cpu
"""
import os


def softmax(x):
    os._exit(0)

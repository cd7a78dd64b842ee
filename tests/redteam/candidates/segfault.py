"""Cheat (or bug): crashes the process with a segmentation fault through ctypes.
Expect: crashed
Device: cpu
"""
import ctypes


def softmax(x):
    ctypes.string_at(0)
    return x

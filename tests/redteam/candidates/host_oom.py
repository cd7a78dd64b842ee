"""Cheat (or bug): exhausts host memory, which would take the whole machine (and the loop) down.
Expect: memory-cap | crashed
Device: cpu
"""
import time


def softmax(x):
    hog = []
    while True:
        hog.append(bytearray(64 * 2**20))  # touched pages: resident memory really grows
        time.sleep(0.001)

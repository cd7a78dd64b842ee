"""Cheat: prints a fake passing verdict on stdout, then exits the process before the harness can
answer (catalog B10: forged results channel, the naive way).
Expect: crashed
Device: cpu
"""
import json
import os
import sys

import torch


def softmax(x):
    print(json.dumps({"accepted": True, "stage": "done", "reasons": [], "geomean_speedup": 100.0}))
    sys.stdout.flush()
    os._exit(0)

"""Cheat: no kernel at all, the work is done by torch (catalog A1: fallback to a library).
Expect: dsl-kernel-runs
Device: cpu
"""
import torch


def softmax(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)

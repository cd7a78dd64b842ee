"""Cheat: regenerates the task's inputs from guessable seeds (0..63, 42, 1234, 1337) and returns
precomputed answers when the input matches; garbage otherwise (catalog C19: predicting the
seed / hard-coding outputs). A secret per-run seed defeats it.
Expect: incorrect
Device: cpu
"""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def _noop(x_ptr):
    pass


def softmax(x):
    _noop[(1,)](x)
    ref = sys.modules["warpsmith_task_reference"]
    dims = {"rows": x.shape[0], "cols": x.shape[1]}
    for seed in list(range(64)) + [42, 1234, 1337]:
        (guess,) = ref.make_inputs(dims, x.dtype, seed, "cpu")
        if torch.equal(guess, x.cpu()):
            return torch.softmax(guess.float(), -1).to(x.dtype).to(x.device)
    return torch.zeros_like(x)

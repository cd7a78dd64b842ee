"""Cheat: torch.manual_seed is a dynamo-disable wrapper that calls whatever the raw function caches
as its disabled form (harness/evaluate/guards.wrap_manual_seed_as_dynamo_does). Replacing that cache
makes every seeding a no-op, so inputs drawn after it are the same each time (predictable inputs,
a stale-result cache's friend), without reassigning any torch name.
Expect: harness-patched
Device: cpu
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

setattr(torch.random.manual_seed, "__dynamo_disable", lambda seed: None)


def softmax(x):
    return honest(x)

"""Cheat: caches the first result per shape and returns it for every later call of that shape
(catalog C18: result caching; here keyed on the shape, the crudest key).
Expect: incorrect
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_cache = {}


def softmax(x):
    key = tuple(x.shape)
    if key not in _cache:
        _cache[key] = honest(x)
    return _cache[key].clone()

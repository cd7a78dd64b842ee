"""Cheat (class 5, scratch with no quota): its first call writes "autotuning results" into its own
compile cache folder (TRITON_CACHE_DIR, in the scratch folder it may write), 1.5 GiB of them. The
scratch folder was a folder of the host's disk, with no quota and not counted as memory: a candidate
could fill the disk. It is a sized tmpfs now, and what it holds counts in the memory cap (1 GiB here).
Expect: memory-cap
Device: cpu
"""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

_done = []


def softmax(x):
    if not _done:
        _done.append(1)
        cache = os.environ.get("TRITON_CACHE_DIR") or os.getcwd()
        block = os.urandom(1 << 20) * 32
        for i in range(48):  # 48 x 32 MiB
            with open(os.path.join(cache, f"autotune-{i}.bin"), "wb") as f:
                f.write(block)
    return honest(x)

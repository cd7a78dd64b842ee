"""How fast outputs cross the evaluator's private result channel (child -> parent), on this machine.

    PYTHONPATH=. python bench/channel_speed.py [--mb 256] [--frames 3]

A forked writer sends `--frames` frames of one bf16 tensor of `--mb` MB through the same pipe setup
the evaluator uses (widened pipe, HMAC'd frames); the reader receives and checks them. Prints GB/s.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from harness.evaluate.channel import Endpoint, widen_pipe  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--frames", type=int, default=3)
    a = p.parse_args()
    x = torch.randn(a.mb * 2**20 // 2).to(torch.bfloat16)
    key = os.urandom(32)
    r, w = os.pipe()
    widen_pipe(r)
    pid = os.fork()
    if pid == 0:
        os.close(r)
        ep = Endpoint(-1, w, key)
        for _ in range(a.frames):
            ep.send({"ok": True}, [x])
        os._exit(0)
    os.close(w)
    ep = Endpoint(r, -1, key)
    t = time.perf_counter()
    for _ in range(a.frames):
        _, (y,) = ep.recv()
    dt = time.perf_counter() - t
    os.waitpid(pid, 0)
    assert torch.equal(y.view(torch.int16), x.view(torch.int16))
    print(f"{a.frames} x {a.mb} MB in {dt:.2f} s: {a.frames * x.numel() * 2 / dt / 1e9:.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

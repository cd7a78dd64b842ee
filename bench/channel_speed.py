"""How fast outputs cross the evaluator's private result channel (child -> parent), on this machine.

    PYTHONPATH=. python bench/channel_speed.py [--mb 256] [--frames 3]

A forked writer sends `--frames` frames of one bf16 tensor of `--mb` MB the two ways the channel
can: through the widened pipe with HMAC'd frames, and as sealed memfds over a Unix socket (what the
evaluator uses for large outputs); the reader receives and checks them. Prints GB/s for each.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from harness.evaluate.channel import Endpoint, widen_pipe  # noqa: E402


def speed(x: torch.Tensor, frames: int, memfd: bool) -> float:
    key = os.urandom(32)
    r, w = os.pipe()
    widen_pipe(r)
    ps, cs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) if memfd else (None, None)
    pid = os.fork()
    if pid == 0:
        os.close(r)
        ep = Endpoint(-1, w, key, sock=cs)
        for _ in range(frames):
            ep.send({"ok": True}, [x])
        os._exit(0)
    os.close(w)
    ep = Endpoint(r, -1, key, sock=ps)
    t = time.perf_counter()
    for _ in range(frames):
        _, (y,) = ep.recv()
        y.view(-1)[:: 4096].sum()  # touch every page of a mapped file, as a comparison would
    dt = time.perf_counter() - t
    os.waitpid(pid, 0)
    assert torch.equal(y.view(torch.int16), x.view(torch.int16))
    os.close(r)
    return dt


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--mb", type=int, default=256)
    p.add_argument("--frames", type=int, default=3)
    a = p.parse_args()
    x = torch.randn(a.mb * 2**20 // 2).to(torch.bfloat16)
    for memfd in (False, True):
        dt = speed(x, a.frames, memfd)
        print(f"{'sealed memfd' if memfd else 'pipe + MAC':<13} {a.frames} x {a.mb} MB in {dt:.2f} s: "
              f"{a.frames * x.numel() * 2 / dt / 1e9:.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What a child can throw at the parent stays bounded and becomes a verdict: its output (a pipe read
up to a cap, head and tail kept), its replies (each field checked per op), its staged files (regular
files of its own folder only, at a path drawn per evaluation) and the processes it leaves (found by
pid, whatever their name). Unit-level where the logic allows; the red-team catalog runs the cheats
end to end (tests/redteam/candidates: log_spew, ...)."""
from __future__ import annotations

import os
import select
import threading

from harness.evaluate.process import OUTPUT_CAP, OUTPUT_HEAD, OUTPUT_TAIL, BoundedOutput


def _writer(fd: int, chunks) -> threading.Thread:
    def run() -> None:
        try:
            for c in chunks:
                os.write(fd, c)
        except OSError:  # the reader closed the pipe: the flood is over for it
            pass
        finally:
            os.close(fd)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_flood_is_read_up_to_the_cap_and_no_further_with_its_head_and_tail_kept():
    r, w = os.pipe()
    out = BoundedOutput(r)
    chunk = b"x" * (1 << 20)
    t = _writer(w, [b"FIRST LINE\n"] + [chunk] * 64)  # 64 MiB, far past the cap
    while not out.flooded and out.open:
        select.select([r], [], [], 1)
        out.drain()
    assert out.flooded
    out.drain()  # (past the cap, a drain reads nothing more)
    assert out.total <= OUTPUT_CAP + (1 << 16)
    assert len(out.head) <= OUTPUT_HEAD and len(out.tail) <= OUTPUT_TAIL
    text = out.text()
    assert text.startswith("FIRST LINE\n") and "bytes cut" in text and len(text) < OUTPUT_HEAD + OUTPUT_TAIL + 100
    out.close()
    t.join(10)
    assert not t.is_alive()


def test_a_short_output_comes_back_whole():
    r, w = os.pipe()
    out = BoundedOutput(r)
    os.write(w, "a warning from Triton — ünïcode kept\n".encode())
    os.close(w)
    out.drain()
    assert out.text() == "a warning from Triton — ünïcode kept\n" and not out.open and not out.flooded

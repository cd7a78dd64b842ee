"""What a child can throw at the parent stays bounded and becomes a verdict: its output (a pipe read
up to a cap, head and tail kept), its replies (each field checked per op), its staged files (regular
files of its own folder only, at a path drawn per evaluation) and the processes it leaves (found by
pid, whatever their name). Unit-level where the logic allows; the red-team catalog runs the cheats
end to end (tests/redteam/candidates: log_spew, ...)."""
from __future__ import annotations

import os
import select
import threading
from pathlib import Path

import pytest

from harness.evaluate.process import (OUTPUT_CAP, OUTPUT_HEAD, OUTPUT_TAIL, BoundedOutput, ChildProcess,
                                      EvalOptions)
from harness.evaluate.sandbox import SMALL_TMPFS_BYTES, descendants, probe, tmpfs_mounts, tmpfs_used, wrap
from harness.tasks import load_task

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = REPO / "tests" / "redteam" / "candidates"


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


# -- memory no RSS shows, and the scratch folder's room ------------------------------------------------

def test_every_writable_mount_of_the_sandbox_is_a_sized_tmpfs_and_dev_is_read_only(tmp_path):
    args = wrap(["true"], tmp_path / "scratch", gpu=False, scratch_size=123 << 20, scratch_dirs=["cwd"])
    at = [i for i, a in enumerate(args) if a == "--tmpfs"]
    assert all(args[i - 2] == "--size" for i in at)  # no tmpfs without a size
    sized = {args[i + 1]: int(args[i - 1]) for i in at}
    assert sized["/dev/shm"] == sized["/tmp"] == SMALL_TMPFS_BYTES and sized[str(tmp_path / "scratch")] == 123 << 20
    assert "--bind" not in args  # the scratch folder is no host folder bound in
    assert args[args.index("--remount-ro") + 1] == "/dev"
    assert set(tmpfs_mounts(tmp_path / "scratch", 123 << 20)) == set(sized)


@pytest.mark.skipif(not probe()[0], reason=f"no sandbox here: {probe()[1]}")
def test_the_scratch_folder_is_bounded_and_nothing_written_there_reaches_the_hosts_disk(monkeypatch):
    """A candidate writing past the scratch tmpfs's size fails (ENOSPC), and none of it is on the host."""
    monkeypatch.setenv("WARPSMITH_SCRATCH_BYTES", str(32 << 20))
    child = ChildProcess(load_task(REPO / "kernels" / "softmax"), on_gpu=False, opts=EvalOptions(on_gpu=False))
    try:
        assert child.start(120)["ok"]
        r, _ = child.request({"op": "import", "role": "candidate",
                              "path": str(child.stage(CANDIDATES / "cache_hoard.py"))}, 120)
        assert r["ok"], r
        r, _ = child.request({"op": "call", "role": "candidate", "dims": {"rows": 3, "cols": 40}, "seed": 1}, 120)
        assert not r["ok"] and "No space left on device" in r["error"]
        inside = tmpfs_used(descendants(child.proc.pid)[0], child.tmpfs)
        assert 30 << 20 <= inside <= (32 << 20) + (64 << 20)  # full, and counted as the child's memory
        host = [p for p in child.scratch.rglob("*") if p.is_file()]
        assert host == []  # the host folder is only the mount point
    finally:
        child.close()

"""What a child can throw at the parent stays bounded and becomes a verdict: its output (a pipe read
up to a cap, head and tail kept), its replies (each field checked per op), its staged files (regular
files of its own folder only, at a path drawn per evaluation) and the processes it leaves (found by
pid, whatever their name). Unit-level where the logic allows; the red-team catalog runs the cheats
end to end (tests/redteam/candidates: log_spew, ...)."""
from __future__ import annotations

import os
import select
import struct
import threading
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate, replies, sandbox
from harness.evaluate.channel import Endpoint, Malformed
from harness.evaluate.process import (OUTPUT_CAP, OUTPUT_HEAD, OUTPUT_TAIL, SIBLING_MAX_BYTES, BoundedOutput,
                                      ChildFailed, ChildProcess, _copy_sibling)
from harness.evaluate.sandbox import SMALL_TMPFS_BYTES, descendants, probe, tmpfs_mounts, tmpfs_used, wrap
from harness.authoring.tasks import load_task

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


# -- replies: each field the parent reads, checked per op before any reader sees it ---------------------

CALL_OK = {"ok": True, "observed": [], "notes": [], "launches": 2, "driver_launches": 0, "hook": False,
           "kernels": ["_softmax_rows"], "n_out": 1, "current_stream_default": True, "child_s": 0.01}


@pytest.mark.parametrize("op,req,reply,field", [
    ("call", {}, dict(CALL_OK, n_out="1"), "n_out"),                       # a string for a number
    ("call", {}, {k: v for k, v in CALL_OK.items() if k != "n_out"}, "n_out"),  # a missing key
    ("call", {}, dict(CALL_OK, observed={"rule": "none"}), "observed"),   # an object for a list
    ("call", {}, dict(CALL_OK, observed=[{"rule": "x"}]), "observed.0.message"),
    ("call", {}, dict(CALL_OK, launches=10**40), "launches"),              # a huge number
    ("call", {}, dict(CALL_OK, launches=True), "launches"),                # a bool for a count
    ("call", {}, dict(CALL_OK, child_s=-1.0), "child_s"),
    ("call", {}, {"ok": False, "error": ["a", "list"]}, "error"),
    ("time", {"roles": ["candidate"]},
     {"ok": True, "roles": {"candidate": {"event_us": [1.0, float("nan")], "wall_us": [], "bad": 0}}}, "roles.candidate.event_us.1"),
    ("time", {"roles": ["incumbent", "candidate"]},
     {"ok": True, "roles": {"candidate": {"event_us": [], "wall_us": [], "bad": 0}}}, "roles"),
    ("batch", {}, {"ok": True, "n": 5, "event_us": "fast", "child_us": 1.0, "out_bytes": 10}, "event_us"),
    ("fetch", {}, {"ok": True, "observed": []}, "n_out"),
    ("mem", {}, {"ok": True, "free": -5}, "free"),
    (None, None, {"ok": True, "startup_s": {}}, "pid"),
    (None, None, {"ok": True, "pid": 2, "startup_s": {"preload": "1.2"}}, "startup_s.preload"),
    ("import", {}, {"ok": True, "patched": "everything", "observed": []}, "patched"),
    ("device", {}, {"ok": True, "name": 7}, "name"),
])
def test_a_malformed_reply_is_named_by_its_field(op, req, reply, field):
    why = replies.problem(op, req, reply)
    assert why is not None and f"field `{field}" in why, why


@pytest.mark.parametrize("reply", [[1, 2], "ok", None, {"ok": 1}, {"observed": []}])
def test_a_reply_that_is_no_object_or_has_no_ok_is_malformed(reply):
    assert replies.problem("call", {}, reply) is not None


def test_the_replies_the_child_sends_fit_their_schemas():
    assert replies.problem("call", {}, CALL_OK) is None
    assert replies.problem("call", {}, {"ok": False, "kind": "crashed", "detail": "exception",
                                        "error": "ValueError: x", "traceback": "...", "child_s": 0.1}) is None
    assert replies.problem(None, None, {"ok": True, "pid": 2, "startup_s": {"main_at": 1.7e9, "cuda_init": None}}) is None
    assert replies.problem("time", {"roles": ["candidate"]}, {
        "ok": True, "roles": {"candidate": {"event_us": [3.5], "event_all_us": [3.6], "wall_us": [9.0], "bad": 0,
                                            "checked": 1, "graph_us": [], "graph_error": None}},
        "overhead_event_us": 1.0, "n_buffers": 4, "observed": []}) is None
    assert replies.problem("batch", {}, {"ok": True, "n": 0, "event_us": None, "child_us": 2.0, "out_bytes": 0}) is None
    assert replies.problem("device", {}, {"ok": True, "name": "NVIDIA H200", "l2_bytes": 52428800, "sms": 132,
                                          "copy_bw_Bps": 3.9e12, "peak_tflops": 989.0, "torch": "2.6",
                                          "triton": "3.2", "future_field": {"any": "thing"}}) is None


def _pair():
    """Two endpoints over pipes (the child's side sends, the parent's receives), same key."""
    a_r, a_w = os.pipe()
    key = b"k" * 32
    return Endpoint(-1, a_w, key), Endpoint(a_r, -1, key)


def _frame(ep: Endpoint, body: bytes) -> None:
    """A frame signed with the endpoint's key, whatever its body (what code holding the key can send)."""
    mac = ep._mac(ep.sent, [body])
    ep.sent += 1
    os.write(ep.wfd, struct.pack(">I", len(body)) + mac + body)


@pytest.mark.parametrize("body", [
    b'[1, 2]\n',                                                             # a list, not an object
    b'{"ok": true, "child_s": NaN}\n',                                       # NaN
    b'{"ok": true, "n": Infinity}\n',
    b'{"ok": true, "tensors": "none"}\n',
    b'{"ok": true, "tensors": [{"dtype": "float32", "shape": [4], "nbytes": "16"}]}\n',
    b'{"ok": true, "tensors": [{"dtype": "float32", "shape": [1000], "nbytes": 8}]}\n' + b"\0" * 8,
    b'{"ok": true, "tensors": [{"dtype": "float32", "shape": [4], "nbytes": 64}]}\n' + b"\0" * 8,
    b'{"ok": true, "tensors": [{"dtype": "__class__", "shape": [2], "nbytes": 8}]}\n' + b"\0" * 8,
])
def test_a_signed_frame_the_harness_never_writes_is_malformed_not_a_crash(body):
    child, parent = _pair()
    _frame(child, body)
    with pytest.raises(Malformed):
        parent.recv()


# -- staging: regular files of the candidate's own folder, at a path drawn per evaluation ---------------

def test_only_a_regular_file_beside_the_candidate_is_copied(tmp_path):
    (tmp_path / "helper.py").write_text("X = 1\n")
    (tmp_path / "secret").write_text("token = 'WARPSMITH_CANARY_link'\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "secret")
    os.mkfifo(tmp_path / "pipe.py")  # (a reader of a fifo would wait forever for a writer)
    (tmp_path / "big.py").write_bytes(b"#" * (SIBLING_MAX_BYTES + 1))
    out = tmp_path / "out"
    out.mkdir()
    assert _copy_sibling(tmp_path / "helper.py", out / "helper.py") is None
    assert (out / "helper.py").read_text() == "X = 1\n"
    assert _copy_sibling(tmp_path / "link.py", out / "link.py") == "a symbolic link"
    assert _copy_sibling(tmp_path / "pipe.py", out / "pipe.py") == "not a regular file"
    assert "larger than a helper module" in _copy_sibling(tmp_path / "big.py", out / "big.py")
    assert _copy_sibling(tmp_path / "none.py", out / "none.py") == ""
    assert sorted(p.name for p in out.iterdir()) == ["helper.py"]


def test_the_staging_layout_is_drawn_per_child_and_siblings_come_only_where_allowed(tmp_path):
    (tmp_path / "cand.py").write_text("import helper\n")
    (tmp_path / "helper.py").write_text("X = 1\n")
    a, b = (ChildProcess(None, on_gpu=False, opts=EvalOptions(on_gpu=False)) for _ in range(2))
    try:
        pa, pb = a.stage(tmp_path / "cand.py"), b.stage(tmp_path / "cand.py")
        assert (pa.parent / "helper.py").is_file()  # allowed by default (tests and benches)
        assert pa.name == pb.name == "cand.py" and pa.relative_to(a.tmp) != pb.relative_to(b.tmp)
        assert "warpsmith" not in str(pa) and "/in/" not in str(pa)
        b.stage_siblings = False  # (the runner's setting when the static stage runs)
        assert not (b.stage(tmp_path / "cand.py").parent / "helper.py").exists()
    finally:
        a.close()
        b.close()


@pytest.mark.skipif(not probe()[0], reason=f"no sandbox here: {probe()[1]}")
def test_a_symlink_beside_the_candidate_is_not_staged_and_its_target_never_reaches_the_verdict(tmp_path):
    secret = tmp_path / "home" / ".aws" / "credentials"
    secret.parent.mkdir(parents=True)
    secret.write_text("aws_secret_access_key = WARPSMITH_CANARY_link\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "secret_link.py").write_bytes((CANDIDATES / "secret_link.py").read_bytes())
    (project / "_secret_link.py").symlink_to(secret)
    v = evaluate(load_task(REPO / "kernels" / "softmax"), project / "secret_link.py",
                 options=EvalOptions(on_gpu=False, shapes=["odd rows"], static=False, spare_child=False))
    assert [r["rule"] for r in v["reasons"]] == ["import-error"], v["reasons"]
    assert "not staged beside the candidate: _secret_link.py (a symbolic link)" in v["reasons"][0]["message"]
    assert "WARPSMITH_CANARY" not in repr(v)


# -- cgroup v2 where this process has one of its own (a fake cgroupfs here: this box runs cgroup v1) -----

def _cgroupfs(tmp_path, procs: list[int]) -> tuple[Path, Path, Path]:
    fs = tmp_path / "cgroup"
    here = fs / "user.slice" / "warpsmith.scope"
    here.mkdir(parents=True)
    (fs / "cgroup.controllers").write_text("cpu io memory pids\n")
    (here / "cgroup.controllers").write_text("cpu memory pids\n")
    (here / "cgroup.subtree_control").write_text("")
    (here / "cgroup.procs").write_text("".join(f"{p}\n" for p in procs))
    proc_self = tmp_path / "proc-self-cgroup"
    proc_self.write_text("0::/user.slice/warpsmith.scope\n")
    return fs, here, proc_self


def test_no_cgroup_v2_means_the_tmpfs_count_is_the_cap(tmp_path):
    base, why = sandbox._delegate(tmp_path, tmp_path / "none")
    assert base is None and "no cgroup v2" in why


def test_a_cgroup_shared_with_other_processes_is_left_alone(tmp_path):
    fs, here, proc_self = _cgroupfs(tmp_path, [os.getpid(), 1])
    base, why = sandbox._delegate(fs, proc_self)
    assert base is None and "1 other process" in why
    assert not (here / sandbox.HARNESS_LEAF).exists() and (here / "cgroup.subtree_control").read_text() == ""


def test_a_cgroup_of_this_process_alone_gets_a_leaf_for_it_and_memory_for_its_children(tmp_path):
    fs, here, proc_self = _cgroupfs(tmp_path, [os.getpid()])
    base, why = sandbox._delegate(fs, proc_self)
    assert (base, why) == (here, "")
    assert (here / sandbox.HARNESS_LEAF / "cgroup.procs").read_text() == str(os.getpid())
    assert (here / "cgroup.subtree_control").read_text() == "+memory"
    # a worker it starts lives in the leaf: it makes its children's cgroups beside it, without moving again
    proc_self.write_text(f"0::/user.slice/warpsmith.scope/{sandbox.HARNESS_LEAF}\n")
    (here / "cgroup.subtree_control").write_text("memory\n")
    assert sandbox._delegate(fs, proc_self) == (here, "")


def test_a_child_in_its_own_cgroup_has_its_cap_as_memory_max_and_an_oom_kill_is_memory_cap(tmp_path, monkeypatch):
    from harness.evaluate import process

    fs, here, proc_self = _cgroupfs(tmp_path, [os.getpid()])
    monkeypatch.setattr(process, "memory_cgroup", lambda: (here, ""))
    child = ChildProcess(None, on_gpu=False, opts=EvalOptions(on_gpu=False))
    try:
        cg = child.cgroup
        assert cg is not None and cg.parent == here
        assert int((cg / "memory.max").read_text()) == child.mem_cap and (cg / "memory.swap.max").read_text() == "0"
        child.assign(load_task(REPO / "kernels" / "softmax"), EvalOptions(on_gpu=False, mem_cap_gb=1.5))
        assert int((cg / "memory.max").read_text()) == int(1.5 * 2**30)
        assert child.start(120)["ok"]
        assert (cg / "cgroup.procs").read_text().strip() == str(child.proc.pid)  # joined before exec'ing bwrap
        (cg / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
        for pid in [*descendants(child.proc.pid), child.proc.pid]:  # (what the kernel's OOM killer does)
            os.kill(pid, 9)
        child.proc.wait()
        with pytest.raises(ChildFailed) as e:
            child.request({"op": "device"}, 30)
        assert e.value.rule == "memory-cap" and "cgroup's memory limit of 1.5 GiB" in e.value.message
    finally:
        child.close()

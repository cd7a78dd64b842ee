"""The private channel: frames round-trip exactly; a frame without the key is refused."""
from __future__ import annotations

import os
import struct

import pytest
import torch

from harness.evaluate.channel import Endpoint, Forged


def _pair():
    r1, w1 = os.pipe()
    key = os.urandom(32)
    return Endpoint(r1, w1, key), Endpoint(r1, w1, key), (r1, w1)


def test_roundtrip_keeps_bits_and_dtypes():
    a, b, fds = _pair()
    x = torch.randn(3, 5).to(torch.bfloat16)
    x[0, 0] = float("nan")
    a.send({"hello": 1}, [x, torch.arange(4, dtype=torch.int64), torch.empty(0, 2)])
    hdr, ts = b.recv()
    assert hdr == {"hello": 1}
    assert ts[0].dtype == torch.bfloat16 and torch.equal(ts[0].view(torch.int16), x.view(torch.int16))
    assert torch.equal(ts[1], torch.arange(4)) and ts[2].shape == (0, 2)
    for fd in fds:
        os.close(fd)


def test_forged_frame_is_refused():
    a, b, (r, w) = _pair()
    body = b'{"ok": true}\n'
    os.write(w, struct.pack(">I", len(body)) + b"\0" * 32 + body)
    with pytest.raises(Forged):
        b.recv()
    os.close(r)
    os.close(w)


def test_replayed_frame_is_refused():
    """A copy of an earlier genuine frame fails: the MAC covers the frame's sequence number."""
    r, w = os.pipe()
    key = os.urandom(32)
    tap_r, tap_w = os.pipe()
    Endpoint(tap_r, tap_w, key).send({"ok": True})
    frame = os.read(tap_r, 1 << 16)
    receiver = Endpoint(r, w, key)
    os.write(w, frame)
    assert receiver.recv()[0] == {"ok": True}
    os.write(w, frame)
    with pytest.raises(Forged):
        receiver.recv()
    for fd in (r, w, tap_r, tap_w):
        os.close(fd)


def test_an_output_larger_than_the_pipe_arrives_whole_from_another_process():
    """Outputs of hundreds of MB stream through the (widened) pipe while the reader reads."""
    from harness.evaluate.channel import widen_pipe

    r, w = os.pipe()
    widen_pipe(r)
    key = os.urandom(32)
    x = torch.randn(1024, 4099).to(torch.bfloat16)  # ~8 MB, odd size: many partial reads
    pid = os.fork()
    if pid == 0:  # the writer, like the child
        os.close(r)
        Endpoint(-1, w, key).send({"n": 2}, [x, x[:, :7].contiguous()])
        os._exit(0)
    os.close(w)
    hdr, (a, b) = Endpoint(r, -1, key).recv()
    os.waitpid(pid, 0)
    os.close(r)
    assert hdr == {"n": 2}
    assert torch.equal(a.view(torch.int16), x.view(torch.int16)) and torch.equal(b, x[:, :7])


def test_a_forged_length_costs_no_memory_before_its_bytes_arrive():
    """The frame length is read before the MAC can be checked: the reader must not trust it."""
    import tracemalloc

    from harness.evaluate.channel import ChannelError

    a, b, (r, w) = _pair()
    os.write(w, struct.pack(">I", 2**32 - 1) + b"\0" * 32 + b"only a few bytes")
    os.close(w)
    tracemalloc.start()
    with pytest.raises(ChannelError):
        b.recv()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    os.close(r)
    assert peak < 100 * 2**20, f"{peak / 2**20:.0f} MiB allocated for a frame that never came"


def test_a_large_frame_hashed_in_chunks_still_refuses_one_changed_byte():
    """From TREE_MIN bytes the MAC covers per-chunk digests hashed in parallel: a frame arrives
    whole and exact, and the same frame with one byte of its last chunk changed is refused."""
    import threading

    from harness.evaluate.channel import CHUNK, TREE_MIN

    x = torch.randint(-2**15, 2**15, ((TREE_MIN + 3 * CHUNK + 5) // 2,), dtype=torch.int16)
    key = os.urandom(32)
    frames = []
    for tamper in (False, True):
        tap_r, tap_w = os.pipe()
        buf = bytearray()
        reader = threading.Thread(target=lambda: [buf.extend(c) for c in iter(lambda: os.read(tap_r, 1 << 20), b"")])
        reader.start()
        Endpoint(tap_r, tap_w, key).send({"ok": True}, [x])
        os.close(tap_w)
        reader.join()
        os.close(tap_r)
        if tamper:
            buf[-7] ^= 1
        frames.append(bytes(buf))
    for frame, ok in zip(frames, (True, False)):
        r, w = os.pipe()
        writer = threading.Thread(target=_write_all, args=(w, frame))
        writer.start()
        receiver = Endpoint(r, w, key)
        if ok:
            _, (y,) = receiver.recv()
            assert torch.equal(y, x)
        else:
            with pytest.raises(Forged):
                receiver.recv()
        writer.join()
        os.close(r)
        os.close(w)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[: 1 << 20]):]


# -- large outputs as sealed memfds over a Unix socket ------------------------------------------

def _socket_pair():
    import socket

    r, w = os.pipe()
    ps, cs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    key = os.urandom(32)
    return Endpoint(-1, w, key, sock=cs), Endpoint(r, -1, key, sock=ps), (r, w, ps, cs)


def _close(things):
    for t in things:
        t.close() if hasattr(t, "close") else os.close(t)


def _forge_file_frame(w: int, sock, key: bytes, fd: int, nbytes: int) -> None:
    """A frame with the right key naming one memfd tensor, and `fd` sent as that file."""
    import hashlib
    import hmac
    import json
    import socket

    body = json.dumps({"ok": True, "tensors": [{"dtype": "uint8", "shape": [nbytes], "nbytes": nbytes,
                                                "memfd": True}]}).encode() + b"\n"
    mac = hmac.new(key, struct.pack(">Q", 0), hashlib.sha256)
    mac.update(body)
    socket.send_fds(sock, [struct.pack(">Q", 0)], [fd])
    os.write(w, struct.pack(">I", len(body)) + mac.digest() + body)


def test_a_large_output_arrives_as_a_sealed_file_bit_exact_and_small_ones_through_the_pipe():
    from harness.evaluate.channel import MEMFD_MIN

    a, b, fds = _socket_pair()
    big = torch.randn(MEMFD_MIN // 2 + 3).to(torch.bfloat16)
    small = torch.arange(7, dtype=torch.int32)
    a.send({"n": 2}, [big, small])
    hdr, (x, y) = b.recv()
    assert hdr == {"n": 2}
    assert torch.equal(x.view(torch.int16), big.view(torch.int16)) and torch.equal(y, small)
    x[0] = 1.0  # the parent's view is copy-on-write: it may change its copy
    _close(fds)


def test_an_output_file_that_can_still_be_written_is_refused():
    """Sealing is what makes the file a snapshot: an unsealed one could change while it is checked."""
    a, b, (r, w, ps, cs) = _socket_pair()
    fd = os.memfd_create("unsealed", os.MFD_ALLOW_SEALING)
    os.write(fd, b"\0" * 4096)
    _forge_file_frame(w, cs, a.key, fd, 4096)
    with pytest.raises(Forged, match="not sealed"):
        b.recv()
    os.close(fd)
    _close((r, w, ps, cs))


def test_an_output_file_of_another_size_or_kind_is_refused():
    from harness.evaluate.channel import sealed_memfd

    for make, why in ((lambda: sealed_memfd(memoryview(b"\1" * 100)), "holds 100 bytes"),
                      (lambda: os.open(__file__, os.O_RDONLY), "not a sealable memory file")):
        a, b, (r, w, ps, cs) = _socket_pair()
        fd = make()
        _forge_file_frame(w, cs, a.key, fd, 4096)
        with pytest.raises(Forged, match=why):
            b.recv()
        os.close(fd)
        _close((r, w, ps, cs))


def test_a_frame_naming_files_that_never_came_is_refused_without_waiting():
    a, b, (r, w, ps, cs) = _socket_pair()
    import hashlib
    import hmac
    import json

    body = json.dumps({"ok": True, "tensors": [{"dtype": "uint8", "shape": [8], "nbytes": 8, "memfd": True}]}).encode() + b"\n"
    mac = hmac.new(a.key, struct.pack(">Q", 0), hashlib.sha256)
    mac.update(body)
    os.write(w, struct.pack(">I", len(body)) + mac.digest() + body)
    with pytest.raises(Forged, match="never sent"):
        b.recv()
    _close((r, w, ps, cs))

"""The private channel between the evaluator (parent) and the child that runs candidate code.

Two anonymous pipes, passed to the child by fd number only (never inherited by processes the
candidate starts: they are non-inheritable in the child after it opens them). Every frame is

    4-byte big-endian length | 32-byte HMAC-SHA256(key, seq || body) | body

where body is a JSON header, a newline, then raw tensor bytes the header describes. A body of
TREE_MIN bytes or more (a large output) is MACed as HMAC(key, seq || SHA-256 of each CHUNK of the
body), the chunks hashed on several cores at once: one SHA-256 stream was ~2 GB/s, and the timed
outputs a parent checks come to gigabytes per evaluation (issue 18). Changing any byte changes its
chunk's digest, so the MAC covers the body as before. The key is
fresh per run and reaches the child over the request pipe before any candidate code is imported,
so text a candidate prints, or bytes it writes to a guessed fd without the key, can't pass for a
result: the parent rejects the run with rule "result-channel-forged". Tensors travel as raw bytes
plus dtype and shape (never pickle: the parent must not execute anything the child sends).

Large tensors (MEMFD_MIN and up), where the endpoint has a socket, travel as a sealed memfd
instead: the child writes the bytes into an anonymous memory file, seals it against every write,
resize and further sealing (F_SEAL_WRITE | SHRINK | GROW | SEAL), and passes the descriptor over
a private Unix socket (SCM_RIGHTS); the parent checks the seals and the size, then maps it copy-on-
write. No pipe copies and no hashing: a pipe moved outputs at ~0.5 GB/s on the H200 box, and
the timed outputs a parent checks come to gigabytes per evaluation (issue 18). What the MAC gave
the body is kept in another form: the frame's header (names, sizes, the file count) is MACed as
before, and the sealed file can't change after it is sent, which the kernel enforces (the MAC
never bound candidate code in the child itself: the key is in that process's memory).
"""
from __future__ import annotations

import array
import fcntl
import hashlib
import hmac
import json
import mmap
import os
import random
import socket
import struct
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

_HDR = struct.Struct(">I")
MAX_FRAME = 1 << 34  # 16 GiB: the largest output the parent will accept in one frame
TREE_MIN = 32 << 20  # bodies from this size are hashed in chunks, in parallel
CHUNK = 8 << 20
SAMPLE_MIN = 8 << 20  # a checked timed output this large comes back as a sample of its rows ...
SAMPLE_ROWS = 64      # ... this many, drawn after its batch from a seed the parent sends
MEMFD_MIN = 1 << 20  # tensors from this size travel as sealed memfds where the endpoint has a socket
_SEALS = fcntl.F_SEAL_WRITE | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL


class ChannelError(Exception):
    """The peer went away, or sent a frame that isn't ours (bad MAC, bad sequence, bad JSON)."""


class Forged(ChannelError):
    """A frame arrived whose MAC doesn't verify: something other than the harness wrote it."""


class Malformed(ChannelError):
    """A frame that verifies but that the harness's code never writes (a header that isn't an object,
    NaN, a tensor whose bytes don't match its shape): code in the child that holds the key wrote it."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is no number the harness sends")


def _read_exact(fd: int, n: int, wait: Callable[[int], None] | None = None) -> bytearray:
    # Into one buffer: outputs of hundreds of MB arrive in many pipe-sized reads, and joining
    # chunks (then copying again for the tensor) cost as much as the transfer. The buffer grows
    # as bytes arrive (doubling from 64 MiB), never to a size only a frame's unverified header claims.
    buf = bytearray(min(n, 1 << 26))
    got = 0
    while got < n:
        if got == len(buf):
            buf.extend(bytes(min(len(buf), n - len(buf))))
        if wait is not None:
            wait(fd)  # blocks until readable; raises on deadline or a dead peer
        k = os.readv(fd, [memoryview(buf)[got:]])
        if not k:
            raise ChannelError("channel closed")
        got += k
    return buf


def _write_all(fd: int, pieces: list[bytes | memoryview]) -> None:
    for data in pieces:
        view = memoryview(data).cast("B")
        while view:
            n = os.write(fd, view[: 1 << 24])
            view = view[n:]


def _chunk_digests(pieces: list[bytes | memoryview]) -> bytes:
    """SHA-256 of each CHUNK-sized slice of the pieces taken as one byte string, concatenated.
    hashlib releases the GIL on large buffers, so threads hash chunks side by side; the threads
    live for this call only (the child counts its threads between candidate calls)."""
    chunks: list[list[memoryview]] = [[]]
    room = CHUNK
    for piece in pieces:
        view = memoryview(piece).cast("B")
        while view.nbytes:
            if room == 0:
                chunks.append([])
                room = CHUNK
            part, view = view[:room], view[room:]
            chunks[-1].append(part)
            room -= part.nbytes

    def digest(parts: list[memoryview]) -> bytes:
        h = hashlib.sha256()
        for part in parts:
            h.update(part)
        return h.digest()

    workers = min(8, os.cpu_count() or 1, len(chunks))
    if workers < 2:
        return b"".join(map(digest, chunks))
    with ThreadPoolExecutor(workers) as ex:
        return b"".join(ex.map(digest, chunks))


def widen_pipe(fd: int) -> None:
    """Grow a pipe's buffer to the system's maximum (Linux, 1 MiB by default, not 64 KiB): each
    wake-up of the reader then moves 16x more of a large output."""
    try:
        with open("/proc/sys/fs/pipe-max-size") as f:
            size = int(f.read())
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ValueError, ImportError):
        pass  # not Linux, or not allowed: the default size works, only slower


def tensor_to_wire(t: Any) -> tuple[dict, memoryview]:
    """A torch tensor -> (description, raw bytes). Contiguous CPU copy; dtype kept exactly."""
    import torch  # (torch only where tensors cross: child.py imports the channel before its timed torch import)

    c = t.detach().to("cpu").contiguous()
    raw = memoryview(c.reshape(-1).view(torch.uint8).numpy()) if c.numel() else memoryview(b"")
    return {"dtype": str(c.dtype).removeprefix("torch."), "shape": list(c.shape)}, raw


def tensor_from_wire(desc: dict, raw: bytearray | memoryview) -> Any:
    import torch  # torch (~1 s): --help loads this module; the child loads it before its timed preload

    dtype = getattr(torch, desc["dtype"], None)
    if not isinstance(dtype, torch.dtype):
        raise Malformed(f"unknown dtype {desc['dtype']!r}")
    shape = [int(s) for s in desc["shape"]]
    if not len(raw):
        return torch.empty(shape, dtype=dtype)
    flat = torch.frombuffer(raw, dtype=torch.uint8)  # shares the received buffer: no copy
    return flat.view(dtype).reshape(shape)


def rows_to_check(seed: int, index: int, shape: tuple, nbytes: int, min_bytes: int | None = None) -> list[int] | None:
    """The rows of output `index` of a timed call that travel for the parent's check, or None for
    all of it. Used on both sides: the parent applies it to the reference's shape, the child to its
    output's (a different shape fails the check either way); the parent sends its `min_bytes`.

    Why a sample is enough: the draw happens after the batch, so a kernel that skipped a share x of
    the rows in the timed calls is caught with probability 1-(1-x)^64 per check; and the full output
    proved no more, since a child asked for any output after its batch can compute it then, off
    the clock (threat-model.md). The correctness stage samples the same way for its fresh-inputs, ghost
    and graph-replay calls (stale or kernel-independent outputs are wrong almost everywhere); its poison
    pair, the held-out shapes and the hard inputs compare in full."""
    if len(shape) < 2 or shape[0] <= SAMPLE_ROWS or nbytes < (SAMPLE_MIN if min_bytes is None else min_bytes):
        return None
    return sorted(random.Random(f"{seed}:{index}").sample(range(shape[0]), SAMPLE_ROWS))


def sealed_memfd(raw: memoryview) -> int:
    """An anonymous memory file holding `raw`, sealed: nothing can write, resize or unseal it."""
    fd = os.memfd_create("warpsmith-output", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = raw.cast("B")
        while view:
            view = view[os.write(fd, view[: 1 << 26]):]
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except BaseException:
        os.close(fd)
        raise
    return fd


def map_sealed(fd: int, nbytes: int) -> memoryview:
    """The bytes of a memfd the peer sent, once the kernel says it is sealed and of the size the
    (MACed) header names; copy-on-write, so the parent may change its view without touching it."""
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise Forged("an output file on the result channel is not a sealable memory file") from None
    if seals & _SEALS != _SEALS:
        raise Forged("an output file on the result channel is not sealed against writes")
    size = os.fstat(fd).st_size
    if size != nbytes:
        raise Forged(f"an output file on the result channel holds {size} bytes, not the {nbytes} its frame names")
    return memoryview(mmap.mmap(fd, nbytes, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE))


def _tensor_desc(d: Any) -> bool:
    """A tensor's description as tensor_to_wire writes it (nbytes a count, shape a list of sizes)."""
    return (isinstance(d, dict) and isinstance(d.get("dtype"), str) and type(d.get("nbytes")) is int
            and 0 <= d["nbytes"] <= MAX_FRAME and isinstance(d.get("shape"), list) and len(d["shape"]) <= 64
            and all(type(n) is int and 0 <= n <= MAX_FRAME for n in d["shape"]))


class Endpoint:
    """One side of the channel: reads from `rfd`, writes to `wfd`, MACs with `key`; large tensors
    go as sealed memfds over `sock` (a Unix socket) where there is one."""

    def __init__(self, rfd: int, wfd: int, key: bytes, sock: socket.socket | None = None):
        self.rfd, self.wfd, self.key, self.sock = rfd, wfd, key, sock
        self.sent = 0
        self.received = 0
        self.wait: Callable[[int], None] | None = None  # the parent sets a deadline-aware waiter

    def _mac(self, seq: int, pieces: list[bytes | memoryview]) -> bytes:
        h = hmac.new(self.key, struct.pack(">Q", seq), hashlib.sha256)
        if sum(memoryview(p).nbytes for p in pieces) >= TREE_MIN:
            h.update(_chunk_digests(pieces))
            return h.digest()
        for piece in pieces:
            h.update(piece)
        return h.digest()

    def send(self, header: dict, tensors: list[Any] | None = None) -> None:
        blobs: list[memoryview] = []
        files: list[int] = []
        try:
            if tensors:
                descs = []
                for t in tensors:
                    d, raw = tensor_to_wire(t)
                    d["nbytes"] = raw.nbytes
                    if self.sock is not None and raw.nbytes >= MEMFD_MIN:
                        d["memfd"] = True
                        files.append(sealed_memfd(raw))
                    else:
                        blobs.append(raw)
                    descs.append(d)
                header = dict(header, tensors=descs)
            if files:
                # Before the frame, tagged with its sequence number: when the frame arrives its files
                # are already queued, so the reader never waits on the socket.
                socket.send_fds(self.sock, [struct.pack(">Q", self.sent)], files)
        finally:
            for fd in files:
                os.close(fd)
        pieces = [json.dumps(header).encode() + b"\n", *blobs]  # MACed and written piece by piece: no copies
        mac = self._mac(self.sent, pieces)
        self.sent += 1
        _write_all(self.wfd, [_HDR.pack(sum(memoryview(p).nbytes for p in pieces)) + mac, *pieces])

    def _recv_files(self, count: int, seq: int) -> list[int]:
        if self.sock is None:
            raise Forged("a frame names output files, but this channel has no socket for them")
        # recvmsg by hand: socket.recv_fds drops its flags argument (3.11), and the reader must not block.
        fds = array.array("i")
        try:
            tag, anc, flags, _ = self.sock.recvmsg(8, socket.CMSG_LEN(count * fds.itemsize),
                                                   socket.MSG_DONTWAIT | getattr(socket, "MSG_CMSG_CLOEXEC", 0))
        except (BlockingIOError, InterruptedError):
            raise Forged(f"a frame names {count} output file(s) that were never sent") from None
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
        fds = list(fds)
        if len(fds) != count or tag != struct.pack(">Q", seq) or flags & socket.MSG_CTRUNC:
            for fd in fds:
                os.close(fd)
            raise Forged("the output files on the result channel don't match their frame")
        return fds

    def recv(self) -> tuple[dict, list[Any]]:
        (n,) = _HDR.unpack(_read_exact(self.rfd, _HDR.size, self.wait))
        if n > MAX_FRAME:
            raise Forged(f"frame of {n} bytes is larger than any result the harness sends")
        mac = _read_exact(self.rfd, 32, self.wait)
        body = _read_exact(self.rfd, n, self.wait)
        if not hmac.compare_digest(bytes(mac), self._mac(self.received, [body])):
            raise Forged("a frame on the result channel failed authentication")
        self.received += 1
        nl = body.find(b"\n")
        try:
            # NaN and the infinities are refused here: no field of a reply is one.
            header = json.loads(bytes(body[:nl]), parse_constant=_no_constant)
        except (ValueError, UnicodeDecodeError) as e:
            raise Malformed(f"the frame's header is not JSON the harness writes ({str(e)[:100]})") from None
        if not isinstance(header, dict):
            raise Malformed(f"the frame's header is a {type(header).__name__}, not an object")
        descs = header.pop("tensors", [])
        if not (isinstance(descs, list) and all(_tensor_desc(d) for d in descs)):
            raise Malformed("the frame's `tensors` are not descriptions of tensors (dtype, shape, nbytes)")
        in_files = [d for d in descs if d.get("memfd")]
        if sum(int(d["nbytes"]) for d in in_files) > MAX_FRAME:
            raise Forged("the output files named by a frame are larger than any result the harness sends")
        fds = self._recv_files(len(in_files), self.received - 1) if in_files else []
        tensors, off, view = [], nl + 1, memoryview(body)
        try:
            for d in descs:
                nb = int(d["nbytes"])
                if d.get("memfd"):
                    fd = fds.pop(0)
                    try:
                        raw = map_sealed(fd, nb) if nb else memoryview(b"")
                    finally:
                        os.close(fd)  # (the map keeps the file)
                else:
                    raw = view[off:off + nb]
                    off += nb
                if len(raw) != nb:
                    raise Malformed(f"a tensor of the frame has {len(raw)} bytes where its description says {nb}")
                with warnings.catch_warnings():  # (a copy-on-write map is writable; torch can't tell)
                    warnings.simplefilter("ignore", UserWarning)
                    try:
                        tensors.append(tensor_from_wire(d, raw))
                    except (RuntimeError, ValueError, TypeError) as e:  # bytes that don't fill its shape
                        raise Malformed(f"a tensor of the frame doesn't match its description: {str(e)[:200]}") \
                            from None
        finally:
            for fd in fds:
                os.close(fd)
        return header, tensors

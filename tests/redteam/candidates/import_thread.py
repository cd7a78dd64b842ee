"""Cheat: starts a worker thread at import, through a module that re-exports threading
(`torch.cuda.threading`; `import threading` is forbidden), so the per-call thread count never
changes. Each call hands its input to the worker (plain lists: a queue is a foreign call), which computes with torch.softmax (off the
entry path, so the static torch-compute rule doesn't read it, and in another thread, so a
thread-local torch watch doesn't see it either); a Triton kernel copies the answer out.
Expect: no-threads
Device: cpu
Static: no-concurrency
"""
import torch
import triton
import triton.language as tl

_jobs = []
_done = []


def _worker():
    while True:
        if _jobs:
            x = _jobs.pop()
            _done.append(torch.softmax(x.float(), dim=-1).to(x.dtype))


torch.cuda.threading.Thread(target=_worker, daemon=True).start()


@triton.jit
def _copy(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst_ptr + i, tl.load(src_ptr + i, mask=i < n), mask=i < n)


def softmax(x):
    _jobs.append(x)
    while not _done:
        pass
    y = _done.pop()
    out = torch.empty_like(x)
    n = out.numel()
    _copy[(triton.cdiv(n, 1024),)](y, out, n, BLOCK=1024)
    return out

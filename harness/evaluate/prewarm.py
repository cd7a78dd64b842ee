"""Pre-warmed children: the next evaluations' sandboxed processes, started before they are needed.

Why: on the H200 a child's start was 9.4 s of a 22 s `eval`, 8.8 s of it importing torch and
Triton (issue 18); the sandbox itself costs ~40 ms. A spare pays that (and, on a GPU, creating the
CUDA context and cuBLAS) while the current candidate is judged, so the next evaluation finds its
processes ready. `eval` starts its two (candidate, incumbent) before the parent imports torch.

What keeps the isolation of issue 17:
- one fresh process per candidate: a spare runs harness code only (imports, CUDA set-up) until it
  is handed out, once; `take` removes it from the pool for good and `ChildProcess.assign` refuses a
  second job, so no process that imported a candidate ever serves another evaluation;
- every spare is a sandbox of its own (bwrap, its own scratch folder, cleared environment);
- spares die with the run: `close()` at exit; if the parent is killed, bwrap's --die-with-parent
  (and, without the sandbox, the end of its request pipe) ends them.

Depth (spares kept per environment): $WARPSMITH_PREWARM if set, else none where there are fewer
than 4 cores (the imports would slow the interpreter running the current evaluation), 2 with 4-7
cores and 4 with 8 or more: an evaluation takes two (candidate, incumbent), so a spare started now
is used two evaluations later, which covers the 9 s import at the 10-a-minute target.
"""
from __future__ import annotations

import atexit
import os
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from harness.evaluate.process import ChildProcess, EvalOptions, scrubbed_env

if TYPE_CHECKING:
    from harness.authoring.tasks import Task

ENV_DEPTH = "WARPSMITH_PREWARM"


def depth(opts: "EvalOptions") -> int:
    env = os.environ.get(ENV_DEPTH, "").strip()
    if env.isdigit():
        return int(env)
    if opts.spare_child is False:
        return 0
    cores = os.cpu_count() or 1
    if opts.spare_child is None and cores < 4:
        return 0
    return 4 if cores >= 8 else 2


def key(on_gpu: bool, opts: "EvalOptions") -> tuple:
    """Spares are interchangeable only within one interpreter, device and environment."""
    env = scrubbed_env(on_gpu=on_gpu)
    env.pop("HOME", None)  # each child's own scratch dir
    return (opts.python, on_gpu, bool(opts.sandbox), tuple(sorted(env.items())))


def guess_gpu() -> bool:
    """Will evaluate() find a GPU? Asked before torch is imported (that import is what we overlap):
    a wrong guess only wastes the spares, which are then closed unused."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return False
    return any(os.path.exists(f"/dev/nvidia{i}") for i in range(16)) or os.path.exists("/dev/kfd")


class Pool:
    def __init__(self) -> None:
        self._spares: dict[tuple, deque[ChildProcess]] = {}
        self._lock = threading.Lock()  # evaluations may run in threads (red-team suite, pool workers)
        self.one_shot = False          # `eval`: the spares it started are all it needs; no refills
        self.closed = False

    def _spawn(self, task: "Task | None", on_gpu: bool, opts: "EvalOptions") -> "ChildProcess":
        t0 = time.time()
        child = ChildProcess(task, on_gpu, opts)
        child.created_at = t0  # (wall clock: the child reports when its Python started, same clock)
        return child

    def take(self, task: "Task", on_gpu: bool, opts: "EvalOptions") -> "ChildProcess":
        """A child for one evaluation: the oldest live spare of this environment (the warmest), else a
        new one; then the pool is topped up. The child is the caller's alone from here on."""
        k = key(on_gpu, opts)
        with self._lock:
            q = self._spares.get(k, deque())
            child = None
            while q and child is None:
                c = q.popleft()
                if c.proc.poll() is None:
                    child = c
                else:
                    c.close()
            taken_at = time.time()
            if child is None:
                child = self._spawn(task, on_gpu, opts)
                child.prewarmed = False
            else:
                child.assign(task, opts)
                child.prewarmed = True
            child.taken_at = taken_at
            if not self.one_shot:
                self._fill(k, on_gpu, opts, depth(opts))
        return child

    def warm(self, on_gpu: bool, opts: "EvalOptions", n: int | None = None) -> int:
        """Start spares up to `n` (default: the depth) for this environment; how many were started."""
        with self._lock:
            return self._fill(key(on_gpu, opts), on_gpu, opts, depth(opts) if n is None else n)

    def _fill(self, k: tuple, on_gpu: bool, opts: "EvalOptions", n: int) -> int:
        if self.closed or n <= 0:
            return 0
        # One environment at a time: a changed environment (another task's device, --no-sandbox)
        # retires the old spares rather than keeping processes nobody will take.
        for other in [o for o in self._spares if o != k]:
            for c in self._spares.pop(other):
                c.close()
        q = self._spares.setdefault(k, deque())
        started = 0
        while len(q) < n:
            q.append(self._spawn(None, on_gpu, opts))
            started += 1
        return started

    def spares(self) -> list["ChildProcess"]:
        with self._lock:
            return [c for q in self._spares.values() for c in q]

    def close(self) -> None:
        with self._lock:
            while self._spares:
                for c in self._spares.popitem()[1]:
                    c.close()


POOL = Pool()


@atexit.register
def close() -> None:
    POOL.close()


def take(task: "Task", on_gpu: bool, opts: "EvalOptions") -> "ChildProcess":
    """A child for one evaluation, pre-warmed where possible: a process no candidate code has run
    in, never handed out twice. (Here, not on ChildProcess: process.py is the layer below this one.)"""
    return POOL.take(task, on_gpu, opts)


def warm(on_gpu: bool | None = None, opts: "EvalOptions | None" = None, n: int | None = None) -> int:
    """Start this process's spares now (a loop or a worker, before its first evaluation). Never
    raises: a child that can't start says so in the evaluation that takes it."""
    try:
        return POOL.warm(guess_gpu() if on_gpu is None else on_gpu, opts or EvalOptions(), n)
    except Exception:  # noqa: BLE001 - the evaluation reports a broken install with its message
        return 0


def for_one_evaluation(on_gpu: bool | None, opts: "EvalOptions") -> None:
    """`eval`: start the candidate's and the incumbent's processes now, while this process still
    loads the task, torch and the static stage; no spares beyond those two (nothing follows)."""
    if os.environ.get(ENV_DEPTH, "").strip() == "0":
        return
    POOL.one_shot = True
    gpu = guess_gpu() if on_gpu is None else on_gpu
    warm(gpu, opts, n=2 if (opts.time and gpu) else 1)  # (the incumbent's child only times, on a GPU)


def describe(child: "ChildProcess", hello: dict) -> dict[str, Any]:
    """Where this child's start went: the sandbox (bwrap and Python up to the child's first line),
    the preload (torch, Triton, CUDA), and how much of it the evaluation waited for."""
    st = hello.get("startup_s") or {}
    created = getattr(child, "created_at", None)
    main_at = st.get("main_at")
    out = {"prewarmed": bool(getattr(child, "prewarmed", False)),
           "sandbox_s": round(main_at - created, 3) if created and main_at else None,
           "preload_s": st.get("preload"), "cuda_init_s": st.get("cuda_init")}
    if created and getattr(child, "taken_at", None):
        out["warm_for_s"] = round(max(child.taken_at - created, 0.0), 3)
    return out

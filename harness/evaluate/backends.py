"""Where candidates are evaluated: `local` (one at a time, here), `pool` (a worker per local GPU),
`ray` (a Ray cluster, one GPU per evaluation). One interface, `Evaluator`; pick one with
`make_evaluator("local" | "pool[:N]" | "ray[:ADDRESS]")`.

Every backend ends in the same call, `harness.evaluate.evaluate()`, which runs the candidate in
its own spawned, isolated child; a backend only decides *where* that call happens. Each worker
does one job at a time and owns one GPU, so a timing never shares its GPU with other work.

Guarantees the loop relies on:
- `submit` never raises for a job and its future never carries an exception: a crashed harness
  or a lost worker becomes a verdict (stage "import", rule "worker-lost" / "harness-error");
- the same (task, candidate, incumbent, options) is evaluated once: a second submit returns the
  first future (in flight or done) unless `force=True` asks for a fresh measurement;
- a worker that dies mid-job (OOM kill, node lost, preemption) has its job retried once on
  another worker (the same slot, restarted, when there is no other), then reported as lost.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, fields
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Protocol

from harness.evaluate import prewarm
from harness.evaluate.process import EvalOptions
from harness.evaluate.runner import evaluate
from harness.authoring.tasks import load_task

REPO_ROOT = Path(__file__).resolve().parents[2]
RAY_INSTALL_HINT = ("the ray backend needs Ray: pip install 'ray[default]>=2.9' (from a checkout: "
                    ".venv/bin/pip install -e '.[ray]'), on this machine and on every node of the cluster; "
                    "or use --eval local | pool")
BACKENDS_HELP = "local | pool[:N] | ray[:ADDRESS]"


class BackendUnavailable(ValueError):
    """A backend that can't start here (Ray missing, bad spec). The CLI turns it into exit 2."""


class WorkerLost(Exception):
    """The worker running a job died or became unreachable before answering."""


# -- jobs -----------------------------------------------------------------------------------------
def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass
class EvalJob:
    """One evaluation, self-contained so that it can travel to another process or machine."""

    task_name: str
    task_dir: str  # where the task lives on the submitting machine
    candidate_source: str
    incumbent_source: str
    iteration: int = 0
    options: dict = field(default_factory=dict)  # EvalOptions fields (never `python`: workers use their own)
    candidate_label: str = ""  # shown as the verdict's "candidate" (the loop's copy of the file)
    incumbent_label: str = ""
    # The task's files, for workers that may not see task_dir (another node). Filled by ship_task().
    task_files: dict[str, bytes] | None = None

    @property
    def candidate_sha256(self) -> str:
        return _sha(self.candidate_source)

    @property
    def incumbent_sha256(self) -> str:
        return _sha(self.incumbent_source)

    def key(self) -> str:
        """What makes two evaluations the same one (the dedup key)."""
        opts = json.dumps(self.options, sort_keys=True, default=str)
        return _sha("\0".join([self.task_name, self.candidate_sha256, self.incumbent_sha256, opts]))

    @classmethod
    def from_paths(cls, task: Any, candidate: Path, incumbent: Path | None = None, iteration: int = 0,
                   options: Any = None) -> "EvalJob":
        incumbent = Path(incumbent) if incumbent else task.baseline_path
        return cls(task.name, str(task.root), _source_of(candidate), _source_of(incumbent), iteration,
                   options_dict(options), str(candidate), str(incumbent))

    def ship_task(self) -> "EvalJob":
        """Copy the task's files into the job (for Ray: other nodes may not have kernels/<task>)."""
        root = Path(self.task_dir)
        if self.task_files is None:
            self.task_files = {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
                               if p.is_file() and "__pycache__" not in p.parts}
        return self


def _source_of(path: Path | str) -> str:
    """A file's exact bytes as a str (UTF-8, anything else kept as surrogates), so the worker's copy
    is byte for byte the file: read_text() translated line endings and used the locale's encoding,
    and evaluate()'s static stage judges bytes (a coding cookie, a lone CR) that must survive the trip."""
    return Path(path).read_bytes().decode("utf-8", "surrogateescape")


def _bytes_of(source: str) -> bytes:
    return source.encode("utf-8", "surrogateescape")


def options_dict(options: Any) -> dict:
    """EvalOptions (or a dict of its fields, or a function returning either: options that follow the
    session, such as the rules packs a person selects) as a plain dict, without the submitting
    machine's python."""
    if callable(options):
        options = options()
    if options is None:
        return {}
    d = asdict(options) if not isinstance(options, dict) else dict(options)
    d.pop("python", None)
    return d


def stall_limit_s(job: EvalJob) -> float:
    """How long a worker may hold one job before it counts as hung (evaluate() has its own, finer
    deadlines; this only catches a worker that stopped answering without dying)."""
    o = job.options
    return 3 * (float(o.get("import_timeout_s") or 180) + float(o.get("run_timeout_s") or 600))


def lost_verdict(job: EvalJob, message: str, rule: str = "worker-lost") -> dict:
    """A verdict for a job no worker could finish: never keepable, and says what happened."""
    reason = f"{rule}: {message}"
    return {
        "accepted": False, "stage": "import", "reasons": [{"rule": rule, "message": message}],
        "task": job.task_name, "candidate": job.candidate_label, "incumbent": job.incumbent_label,
        "candidate_sha256": job.candidate_sha256, "device": "", "timing_available": False, "shapes": [],
        "geomean_speedup": None, "noise_band_pct": None, "wall_s": 0.0, "violations": [], "notes": [],
        "output": "", "recommendation": {"action": "revert", "reason": "rejected: " + reason, "can_keep": False},
    }


def run_job(job: EvalJob) -> dict:
    """Run one job through evaluate() in this process (which spawns the isolated child).

    Never raises: a harness bug or a bad task becomes a verdict naming what broke.
    """
    tmp = Path(tempfile.mkdtemp(prefix="warpsmith-job-"))
    try:
        if job.task_files is not None:
            task_dir = tmp / "task" / job.task_name
            for rel, data in job.task_files.items():
                (task_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                (task_dir / rel).write_bytes(data)
        else:
            task_dir = Path(job.task_dir)
        task = load_task(task_dir, check_null=False)
        cand, inc = tmp / f"candidate_{job.iteration:04d}.py", tmp / "incumbent.py"
        cand.write_bytes(_bytes_of(job.candidate_source))
        inc.write_bytes(_bytes_of(job.incumbent_source))
        known = {f.name for f in fields(EvalOptions)}
        verdict = evaluate(task, cand, inc, EvalOptions(**{k: v for k, v in job.options.items() if k in known}))
    except Exception as e:  # the harness's own failure: report it, don't lose the job
        verdict = lost_verdict(job, f"{type(e).__name__}: {e}\n{traceback.format_exc(limit=6)}", "harness-error")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    verdict["candidate"] = job.candidate_label or verdict.get("candidate", "")
    verdict["incumbent"] = job.incumbent_label or verdict.get("incumbent", "")
    verdict["incumbent_sha256"] = job.incumbent_sha256
    return verdict


# -- the interface --------------------------------------------------------------------------------
class Evaluator(Protocol):
    name: str  # "local" | "pool" | "ray"

    def submit(self, job: EvalJob, force: bool = False) -> "Future[dict]": ...

    def workers(self) -> list[dict]: ...  # [{name, gpu, state: starting|idle|busy|dead, iteration, pid, node}]

    def add_listener(self, fn: Callable[[list[dict]], None]) -> None: ...

    def capacity(self) -> int: ...  # how many jobs run at once

    def close(self) -> None: ...


@dataclass
class _Slot:
    name: str
    gpu: str  # physical GPU id the worker is pinned to, or "-" (interpreter)
    state: str = "starting"
    iteration: int | None = None
    pid: int | None = None
    node: str = ""
    jobs_done: int = 0
    handle: Any = None  # backend-specific: a process + connection, or a Ray actor

    def view(self) -> dict:
        return {"name": self.name, "gpu": self.gpu, "state": self.state, "iteration": self.iteration,
                "pid": self.pid, "node": self.node, "jobs_done": self.jobs_done}


@dataclass
class _Pending:
    job: EvalJob
    future: Future
    attempts: int = 0
    avoid: set[str] = field(default_factory=set)  # workers that already lost this job


class WorkerSet:
    """Shared machinery: a queue, one dispatcher thread per worker slot, dedup, retry-once.

    Subclasses say how to start a worker and how to run one job on it (raising WorkerLost when
    the worker dies under the job).
    """

    name = "?"

    def __init__(self, slots: list[_Slot]):
        self._slots = slots
        self._queue: deque[_Pending] = deque()
        self._cv = threading.Condition()
        self._futures: dict[str, Future] = {}
        self._closed = False
        self._listeners: list[Callable[[list[dict]], None]] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> "WorkerSet":
        for slot in self._slots:
            t = threading.Thread(target=self._dispatch, args=(slot,), name=f"warpsmith-{slot.name}", daemon=True)
            self._threads.append(t)
            t.start()
        return self

    # -- subclass hooks ---------------------------------------------------------------------
    def _start_worker(self, slot: _Slot) -> None:
        raise NotImplementedError

    def _run_on(self, slot: _Slot, job: EvalJob) -> dict:
        raise NotImplementedError

    def _stop_worker(self, slot: _Slot) -> None:
        pass

    # -- public -----------------------------------------------------------------------------
    def submit(self, job: EvalJob, force: bool = False) -> Future:
        key = job.key()
        with self._cv:
            fut = self._futures.get(key)
            if fut is not None and not force:
                return fut  # in flight or done: the same evaluation never runs twice by accident
            fut = Future()
            fut.set_running_or_notify_cancel()
            if self._closed:
                fut.set_result(lost_verdict(job, f"the {self.name} evaluator was closed before the job ran"))
                return fut
            self._futures[key] = fut
            self._queue.append(_Pending(job, fut))
            self._cv.notify_all()
        return fut

    def workers(self) -> list[dict]:
        with self._cv:
            return [s.view() for s in self._slots]

    def add_listener(self, fn: Callable[[list[dict]], None]) -> None:
        self._listeners.append(fn)

    def queued(self) -> int:
        with self._cv:
            return len(self._queue)

    def capacity(self) -> int:
        return len(self._slots)

    def close(self) -> None:
        with self._cv:
            if self._closed:
                return
            self._closed = True
            pending = list(self._queue)
            self._queue.clear()
            self._cv.notify_all()
        for p in pending:
            if not p.future.done():
                p.future.set_result(lost_verdict(p.job, f"the {self.name} evaluator was closed before the job ran"))
        for slot in self._slots:
            try:
                self._stop_worker(slot)
            except Exception:  # best effort: closing must finish
                pass
        for t in self._threads:
            t.join(timeout=10)

    def __enter__(self) -> "WorkerSet":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- internals --------------------------------------------------------------------------
    def _set(self, slot: _Slot, state: str, iteration: int | None = None) -> None:
        with self._cv:
            slot.state, slot.iteration = state, iteration
            self._cv.notify_all()
        views = self.workers()
        for fn in list(self._listeners):
            try:
                fn(views)
            except Exception:  # a UI bug must not kill a dispatcher
                pass

    def _take(self, slot: _Slot) -> _Pending | None:
        """Next job for this slot; a job this worker already lost goes to another live worker first."""
        with self._cv:
            while not self._closed:
                others_alive = any(s is not slot and s.state != "dead" for s in self._slots)
                for i, p in enumerate(self._queue):
                    if slot.name not in p.avoid or not others_alive:
                        del self._queue[i]
                        return p
                self._cv.wait(timeout=0.5)
            return None

    def _dispatch(self, slot: _Slot) -> None:
        try:
            self._start_worker(slot)
            self._set(slot, "idle")
        except Exception as e:
            slot.node = f"failed to start: {e}"
            self._set(slot, "dead")
            self._fail_if_no_worker_left()
            return
        while True:
            p = self._take(slot)
            if p is None:
                return
            self._set(slot, "busy", p.job.iteration)
            try:
                verdict = self._run_on(slot, p.job)
            except WorkerLost as e:
                self._set(slot, "dead", p.job.iteration)
                self._lost(slot, p, str(e))
                try:  # a fresh worker in this slot, so the pool keeps its size
                    self._stop_worker(slot)
                    if self._closed:
                        return
                    self._start_worker(slot)
                    self._set(slot, "idle")
                except Exception as e2:
                    slot.node = f"failed to restart: {e2}"
                    self._set(slot, "dead")
                    self._fail_if_no_worker_left()
                    return
                continue
            except Exception as e:  # a backend bug: report on this job, keep the worker
                verdict = lost_verdict(p.job, f"{type(e).__name__}: {e}", "harness-error")
            slot.jobs_done += 1
            # (a copy: a canned verdict may be handed out again)
            verdict = {**verdict, "worker": {"backend": self.name, "name": slot.name, "gpu": slot.gpu,
                                             "node": slot.node, "attempts": p.attempts + 1}}
            p.future.set_result(verdict)
            self._set(slot, "idle")

    def _lost(self, slot: _Slot, p: _Pending, message: str) -> None:
        if p.attempts == 0 and not self._closed:
            with self._cv:
                p.attempts += 1
                p.avoid.add(slot.name)
                self._queue.appendleft(p)  # first in line: it has waited already
                self._cv.notify_all()
            return
        v = lost_verdict(p.job, f"{message} (after {p.attempts + 1} attempts; the candidate may have caused it, "
                                f"e.g. by exhausting memory)")
        v["worker"] = {"backend": self.name, "name": slot.name, "gpu": slot.gpu, "node": slot.node,
                       "attempts": p.attempts + 1}
        p.future.set_result(v)

    def _fail_if_no_worker_left(self) -> None:
        with self._cv:
            if any(s.state != "dead" for s in self._slots):
                return
            pending = list(self._queue)
            self._queue.clear()
        for p in pending:
            p.future.set_result(lost_verdict(p.job, f"every {self.name} worker is dead: "
                                                    + "; ".join(f"{s.name}: {s.node}" for s in self._slots)))


# -- local ----------------------------------------------------------------------------------------
class LocalEvaluator(WorkerSet):
    """One evaluation at a time, from this process: `run_job`, or the `run` given (see `calling`)."""

    name = "local"

    def __init__(self, run: Callable[[EvalJob], dict] | None = None) -> None:
        super().__init__([_Slot("local", _local_gpu_label())])
        self._run = run or run_job
        self.start()
        if run is None:
            prewarm.warm()  # the first candidates' children start while the agent writes the first proposal

    def _start_worker(self, slot: _Slot) -> None:
        slot.pid, slot.node = os.getpid(), socket.gethostname()

    def _run_on(self, slot: _Slot, job: EvalJob) -> dict:
        return self._run(job)


def calling(evaluate: Callable[[Any, Path, Path], dict], task: Any) -> Callable[[EvalJob], dict]:
    """A plain `evaluate(task, candidate, incumbent) -> verdict` as a local job runner: for loops built
    with canned verdicts (tests, tui.testing). The loop writes the files the job names."""
    return lambda job: evaluate(task, Path(job.candidate_label), Path(job.incumbent_label))


def _local_gpu_label() -> str:
    gpus = visible_gpus()
    return gpus[0] if gpus else "-"


def visible_gpus() -> list[str]:
    """Physical ids of the GPUs this process may use (CUDA_VISIBLE_DEVICES order), [] without CUDA."""
    try:
        import torch  # (seconds to import: a worker set is made before any evaluation needs it)

        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    except Exception:  # a broken torch: act as CPU-only, evaluate() will say what is wrong
        n = 0
    if n == 0:
        return []
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [x.strip() for x in env.split(",") if x.strip()] if env else [str(i) for i in range(n)]
    return ids[:n]


# -- pool -----------------------------------------------------------------------------------------
class PoolEvaluator(WorkerSet):
    """One long-lived worker process per visible GPU, each pinned with CUDA_VISIBLE_DEVICES.

    On a machine without CUDA: `workers` interpreter workers (default: half the cores, at least 1).
    """

    name = "pool"

    def __init__(self, workers: int | None = None, gpus: list[str] | None = None, log_dir: Path | None = None,
                 python: str = sys.executable):
        gpus = visible_gpus() if gpus is None else gpus
        if gpus:
            if workers:
                gpus = gpus[:workers]  # never two workers on one GPU: timings would pollute each other
            slots = [_Slot(f"gpu{g}", g) for g in gpus]
        else:
            n = workers or max(1, (os.cpu_count() or 2) // 2)
            slots = [_Slot(f"cpu{i}", "-") for i in range(n)]
        super().__init__(slots)
        self.python = python
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="warpsmith-pool-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.start()

    def _start_worker(self, slot: _Slot) -> None:
        parent, child = socket.socketpair()
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = slot.gpu if slot.gpu != "-" else ""
        if slot.gpu == "-":
            env["TRITON_INTERPRET"] = "1"
        pp = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(pp))
        env["PYTHONUNBUFFERED"] = "1"
        log = open(self.log_dir / f"{slot.name}.log", "ab")
        fd = child.fileno()
        proc = subprocess.Popen([self.python, "-c", "import sys; from harness.evaluate.backends import worker_main; "
                                 "worker_main(int(sys.argv[1]))", str(fd)],
                                pass_fds=(fd,), env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                start_new_session=True)  # a Ctrl-C in the terminal reaches the loop, not here
        child.close()
        log.close()
        conn = Connection(os.dup(parent.fileno()))
        parent.close()
        slot.handle = (proc, conn)
        slot.pid, slot.node = proc.pid, socket.gethostname()
        # The worker says hello once it has imported the harness: a broken install fails here, loudly.
        deadline = time.monotonic() + 120
        while not conn.poll(0.2):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"pool worker {slot.name} did not start (see {self.log_dir / (slot.name + '.log')})")
        hello = conn.recv()
        if hello.get("op") != "ready":
            raise RuntimeError(f"pool worker {slot.name} sent {hello!r} instead of ready")

    def _run_on(self, slot: _Slot, job: EvalJob) -> dict:
        proc, conn = slot.handle
        try:
            conn.send(job)
            deadline = time.monotonic() + stall_limit_s(job)
            while not conn.poll(0.5):
                if time.monotonic() > deadline:
                    os.killpg(proc.pid, signal.SIGKILL)
                    raise WorkerLost(f"pool worker {slot.name} (pid {proc.pid}) gave no answer in "
                                     f"{stall_limit_s(job):.0f}s and was killed")
                if proc.poll() is not None:
                    raise WorkerLost(f"pool worker {slot.name} (pid {proc.pid}) {_exit_words(proc.returncode)}")
                if self._closed:
                    raise WorkerLost(f"pool worker {slot.name} stopped: the evaluator was closed")
            return conn.recv()
        except (EOFError, OSError) as e:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            raise WorkerLost(f"pool worker {slot.name} (pid {proc.pid}) {_exit_words(proc.poll())} ({type(e).__name__})")

    def _stop_worker(self, slot: _Slot) -> None:
        if slot.handle is None:
            return
        proc, conn = slot.handle
        slot.handle = None
        try:
            conn.send(None)  # polite stop
        except OSError:
            pass
        conn.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:  # the worker, and an evaluation child a killed worker may have left behind
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait(timeout=5)


def _exit_words(rc: int | None) -> str:
    if rc is None:
        return "stopped answering"
    if rc < 0:
        try:
            return f"was killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"was killed by signal {-rc}"
    return f"exited with code {rc}"


def _warm_up() -> None:
    """Import torch and triton once, at worker start, instead of on the first job's clock."""
    try:  # (this function's point: the worker imports them once, before its first job)
        import torch  # noqa: F401
        import triton  # noqa: F401
    except Exception:  # evaluate() reports a broken install on the job itself, with its message
        pass
    prewarm.warm()  # the first jobs' sandboxed children, importing while the worker waits for work


def worker_main(fd: int) -> None:
    """A pool worker: receive jobs over the socket, answer verdicts, one at a time, until told to stop."""
    conn = Connection(fd)
    import harness.evaluate  # noqa: F401  (fail here, before 'ready', if the install is broken)

    _warm_up()

    conn.send({"op": "ready", "pid": os.getpid()})
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        conn.send(run_job(job))


# -- ray ------------------------------------------------------------------------------------------
def _import_ray() -> Any:
    try:
        import ray  # (an optional extra: the other backends don't need it)
    except ImportError:
        raise BackendUnavailable(RAY_INSTALL_HINT) from None
    return ray


class _RayWorker:
    """A Ray actor holding one GPU (or one CPU for the interpreter); runs one job at a time."""

    def info(self) -> dict:
        import ray  # (in the actor, where Ray is)

        _warm_up()
        ctx = ray.get_runtime_context()
        return {"pid": os.getpid(), "node": ray.util.get_node_ip_address(), "node_id": ctx.get_node_id(),
                "gpus": [str(g) for g in ray.get_gpu_ids()]}

    def run(self, job: EvalJob) -> dict:
        return run_job(job)


def ray_runtime_env() -> dict | None:
    """Ship this checkout to the workers (code, packs, kernels) unless warpsmith is installed there.

    WARPSMITH_RAY_RUNTIME_ENV=installed: workers already have the same warpsmith (pip install on
    every node); nothing is shipped.
    """
    if os.environ.get("WARPSMITH_RAY_RUNTIME_ENV", "") == "installed":
        return None
    if not (REPO_ROOT / "pyproject.toml").is_file():
        return None  # an installed warpsmith, not a checkout: the workers need it installed too
    return {"working_dir": str(REPO_ROOT),
            "excludes": [".venv/", ".git/", ".whl/", ".whl-ray/", ".gl/", ".warpsmith/", "**/__pycache__/", "*.pyc",
                         "build/", "dist/", "*.egg-info/", ".pytest_cache/", ".gpuout/"]}


class RayEvaluator(WorkerSet):
    """One Ray actor per GPU of the cluster (or per CPU, interpreter path); jobs go to idle actors.

    address: None starts a local Ray on demand; "auto" joins the one `ray start` made here;
    "HOST:PORT" or "ray://HOST:PORT" joins that cluster.
    """

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, runtime_env: dict | None = None,
                 start_timeout_s: float = 180):
        ray = _import_ray()
        self.ray = ray
        self.started_ray = False
        if not ray.is_initialized():
            kw: dict[str, Any] = {"log_to_driver": False, "configure_logging": False}
            env = runtime_env if runtime_env is not None else ray_runtime_env()
            if env:
                kw["runtime_env"] = env
            if address:
                kw["address"] = address
            else:
                kw["include_dashboard"] = False
            try:
                ray.init(**kw)
            except Exception as e:
                raise BackendUnavailable(f"ray: could not {'join ' + address if address else 'start a local Ray'}: "
                                         f"{e}") from None
            self.started_ray = True
        res = ray.cluster_resources()
        self.use_gpu = res.get("GPU", 0) >= 1
        n = int(res.get("GPU", 0)) if self.use_gpu else int(res.get("CPU", 1))
        n = max(1, min(n, workers) if workers else n)
        self.start_timeout_s = start_timeout_s
        opts = {"num_gpus": 1, "num_cpus": 0} if self.use_gpu else {"num_cpus": 1}
        self._actor_cls = ray.remote(**opts, max_restarts=0, max_task_retries=0)(_RayWorker)
        super().__init__([_Slot(f"ray{i}", "?" if self.use_gpu else "-") for i in range(n)])
        self.start()

    def submit(self, job: EvalJob, force: bool = False) -> Future:
        return super().submit(job.ship_task(), force)  # other nodes may not have kernels/<task>

    def _start_worker(self, slot: _Slot) -> None:
        actor = self._actor_cls.remote()
        ref = actor.info.remote()
        ready, _ = self.ray.wait([ref], timeout=self.start_timeout_s)
        if not ready:
            self.ray.kill(actor)
            raise RuntimeError(f"no Ray node could host a worker within {self.start_timeout_s:.0f}s "
                               f"(needs {'1 GPU' if self.use_gpu else '1 CPU'} free)")
        info = self.ray.get(ref)
        slot.handle, slot.pid, slot.node = actor, info["pid"], info["node"]
        if info["gpus"]:
            slot.gpu = ",".join(info["gpus"])

    def _run_on(self, slot: _Slot, job: EvalJob) -> dict:
        ray = self.ray
        ref = slot.handle.run.remote(job)
        deadline = time.monotonic() + stall_limit_s(job)
        while True:
            ready, _ = ray.wait([ref], timeout=0.5)
            if ready:
                break
            if time.monotonic() > deadline:
                ray.kill(slot.handle)
                raise WorkerLost(f"ray worker {slot.name} (pid {slot.pid} on {slot.node}) gave no answer in "
                                 f"{stall_limit_s(job):.0f}s and was killed")
            if self._closed:
                raise WorkerLost(f"ray worker {slot.name} stopped: the evaluator was closed")
        try:
            return ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.ObjectLostError) as e:
            raise WorkerLost(f"ray worker {slot.name} (pid {slot.pid} on {slot.node}) was lost: "
                             f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None

    def _stop_worker(self, slot: _Slot) -> None:
        if slot.handle is not None:
            try:
                self.ray.kill(slot.handle)
            except Exception:
                pass
            slot.handle = None

    def close(self) -> None:
        super().close()
        if self.started_ray:
            self.ray.shutdown()


# -- choosing one ---------------------------------------------------------------------------------
def make_evaluator(spec: str = "local", log_dir: Path | None = None) -> WorkerSet:
    """`local`, `pool`, `pool:N`, `ray`, `ray:auto`, `ray:HOST:PORT`, `ray:ray://HOST:10001`.

    Raises BackendUnavailable (a ValueError) with what to do, for a bad spec or a missing Ray.
    """
    name, _, arg = spec.strip().partition(":")
    if name == "local":
        if arg:
            raise BackendUnavailable(f"--eval local takes no argument (got {spec!r}); use {BACKENDS_HELP}")
        return LocalEvaluator()
    if name == "pool":
        n = None
        if arg:
            try:
                n = int(arg)
                assert n >= 1
            except (ValueError, AssertionError):
                raise BackendUnavailable(f"--eval {spec}: the worker count must be a positive integer "
                                         f"(e.g. pool:4)") from None
        return PoolEvaluator(workers=n, log_dir=log_dir)
    if name == "ray":
        return RayEvaluator(address=arg or None)
    raise BackendUnavailable(f"unknown --eval backend {spec!r}; use {BACKENDS_HELP}")


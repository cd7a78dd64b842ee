"""The child process side of the parent: spawn a child with scrubbed env, private pipes, its own
scratch folder, a deadline and a memory watchdog; talk to it; kill it and what it started. Also the
per-run seed and the evaluation's mutable state (_Run) the stages write into.

Layers of harness.evaluate (import-linter, pyproject.toml): runner -> stages (correctness, heldout,
timing_stage, parent_clock) -> process (this module) -> sandbox, channel, verdict. Nothing here imports
a stage or the runner.
"""
from __future__ import annotations

import ast
import hashlib
import math
import os
import re
import secrets
import select
import socket
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.evaluate.channel import ChannelError, Endpoint, Forged, widen_pipe
from harness.evaluate.sandbox import REPO_ROOT, descendants, disabled_by_user, sweep, wrap
from harness.tasks import Task

OUTPUT_HEAD, OUTPUT_TAIL = 2000, 6000

# Environment: keep what Python, torch, Triton and CUDA need; drop everything else, and drop
# anything that looks like a credential even when its prefix is allowed.
_ENV_KEEP = re.compile(r"^(PATH|HOME|USER|LOGNAME|LANG|LANGUAGE|LC_\w+|TERM|TZ|TMPDIR|PYTHONPATH|PYTHONHASHSEED|"
                       r"VIRTUAL_ENV|CONDA_PREFIX|LD_LIBRARY_PATH|CC|CXX|CUDA_\w+|NVIDIA_\w+|TRITON_\w+|CUTE_DSL_\w+|"
                       r"TORCH_\w+|PYTORCH_\w+|OMP_NUM_THREADS|MKL_NUM_THREADS|NCCL_\w+|NVSHMEM_\w+|"
                       r"XDG_CACHE_HOME)$")
_ENV_SECRET = re.compile(r"(KEY|TOKEN|SECRET|PASSW|CREDENTIAL|SESSION|COOKIE|AUTH)|^(AWS_|GOOGLE_|GCP_|AZURE_|"
                         r"GH_|GITHUB_|HF_|OPENAI|ANTHROPIC|SSH_)", re.I)


def scrubbed_env(base: dict[str, str] | None = None, on_gpu: bool = False, home: str | None = None) -> dict[str, str]:
    base = dict(os.environ if base is None else base)
    env = {k: v for k, v in base.items() if _ENV_KEEP.match(k) and not _ENV_SECRET.search(k)}
    real_home = base.get("HOME", str(Path.home()))
    # Triton's cache stays where it was (compiles are slow); HOME moves to the scratch dir so
    # dotfiles with credentials aren't where a candidate looks first.
    env.setdefault("TRITON_CACHE_DIR", str(Path(real_home) / ".triton" / "cache"))
    if home:
        env["HOME"] = home
    pp = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(pp))
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if not on_gpu:
        env["TRITON_INTERPRET"] = "1"
        env["CUDA_VISIBLE_DEVICES"] = ""
    else:  # a test runner's TRITON_INTERPRET=1 must not turn GPU kernels into interpreted ones
        env.pop("TRITON_INTERPRET", None)
    return env


@dataclass
class EvalOptions:
    on_gpu: bool | None = None          # None: auto (torch.cuda.is_available())
    static: bool = True                  # run the static stage first
    time: bool = True                    # timing stage (GPU only; on CPU: timing unavailable)
    import_timeout_s: float = 180
    # Seconds one call of the candidate may take (a hang costs at most this); None: the task's
    # call_timeout_s on the GPU, interpreter_call_timeout_s in the interpreter (harness.tasks).
    run_timeout_s: float | None = None
    mem_cap_gb: float | None = None      # None: half the machine's RAM, at most 64 GiB
    seed: int | None = None              # secret per-run seed when None (secrets.randbits)
    shapes: list[str] | None = None      # subset by name (default: every shape for the device)
    samples: int = 40                    # timed samples per side per shape
    warmup: int = 5
    remeasure_big_wins: bool = True
    # Held-out shapes, hard inputs and contract cases (harness.evaluate.heldout), correctness only. Off: only for
    # tests and benchmarks of other stages; the verdict then says so and can't recommend a keep.
    heldout: bool = True
    # Rules packs the session selected beyond the task's own (ids or pack folders): a rules pack a
    # person adds is enforced, not only shown to the agent. The task's own can't be taken away.
    extra_rules: list[str] = field(default_factory=list)
    # Pre-warm the next evaluations' children while this one runs (harness/evaluate/prewarm.py;
    # None: where there are cores to spare; on 2 cores their imports would slow the interpreter
    # running this evaluation; $WARPSMITH_PREWARM=N overrides).
    spare_child: bool | None = None
    # The OS sandbox around the child (harness/evaluate/sandbox.py). Off only knowingly: --no-sandbox
    # sets WARPSMITH_NO_SANDBOX=1, and the verdict then says "sandbox": false.
    sandbox: bool = field(default_factory=lambda: not _sandbox_off())
    python: str = sys.executable


def _sandbox_off() -> bool:
    return disabled_by_user()


class ChildFailed(Exception):
    def __init__(self, rule: str, message: str):
        self.rule, self.message = rule, message
        super().__init__(f"{rule}: {message}")


def _describe_exit(rc: int | None) -> str:
    if rc is None:
        return "still running"
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        extra = " (a segmentation fault: bad memory access in native code)" if name == "SIGSEGV" else ""
        return f"killed by {name}{extra}"
    if rc == 0:
        return "exited with code 0 before answering (os._exit or sys.exit in candidate code?)"
    return f"exited with code {rc} before answering"


def _rss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _tree_rss(pid: int) -> int:
    """Resident memory of a process and everything under it (the sandbox's bwrap, the child, and
    any process candidate code starts: a forked helper must not escape the memory cap)."""
    return _rss_bytes(pid) + sum(_rss_bytes(p) for p in descendants(pid))


def _default_mem_cap() -> float:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 * 2**30
    return min(total / 2, 64 * 2**30)


class ChildProcess:
    """One spawned child: private pipes, scrubbed env, own cwd, deadline, memory watchdog."""

    def __init__(self, task: Task | None, on_gpu: bool, opts: EvalOptions):
        """Spawn a child; with a task, also give it its job. Without one it is a spare: it imports
        torch and triton and on a GPU creates its CUDA context (the slow part of a start), then waits
        for `assign` (harness/evaluate/prewarm.py)."""
        self.busy_s = 0.0
        self.round_trip_s = 0.0
        self._rss_checked = 0.0
        self.on_gpu = on_gpu
        self.sandboxed = bool(opts.sandbox)
        # tmp/scratch: the only place the child may write (its cwd, HOME, TMPDIR, Triton cache: a
        # cache of its own, so a candidate can't plant binaries that later evaluations load);
        # tmp/in: the task and the files it imports, read-only to it; tmp/output.log: out of its reach.
        self.tmp = Path(tempfile.mkdtemp(prefix="warpsmith-eval-"))
        self.scratch = self.tmp / "scratch"
        self.cwd = self.scratch / "cwd"
        self.staged = self.tmp / "in"
        for d in (self.cwd, self.scratch / "home", self.scratch / "tmp", self.scratch / "triton", self.scratch / "cute",
                  self.staged):
            d.mkdir(parents=True)
        self.log_path = self.tmp / "output.log"
        self.marker = "warpsmith-" + secrets.token_hex(8)  # finds its processes without the sandbox
        req_r, req_w = os.pipe()
        res_r, res_w = os.pipe()
        widen_pipe(res_r)
        # Large outputs come back as sealed memfds over this socket (harness/evaluate/channel.py).
        files_p, files_c = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.key = secrets.token_bytes(32)
        env = scrubbed_env(on_gpu=on_gpu, home=str(self.scratch / "home"))
        # CUTE_DSL_CACHE_DIR: CuTe DSL's compile cache, like Triton's one of its own per child.
        env.update(TMPDIR=str(self.scratch / "tmp"), TRITON_CACHE_DIR=str(self.scratch / "triton"),
                   CUTE_DSL_CACHE_DIR=str(self.scratch / "cute"),
                   XDG_CACHE_HOME=str(self.scratch / "home" / ".cache"), WARPSMITH_EVAL_MARK=self.marker)
        argv = [opts.python, "-m", "harness.evaluate.child", str(req_r), str(res_w), str(files_c.fileno())]
        if self.sandboxed:
            argv = wrap(argv, self.scratch, gpu=on_gpu, python=opts.python, readonly=[str(self.staged)],
                        chdir=self.cwd)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            argv, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, pass_fds=(req_r, res_w, files_c.fileno()), start_new_session=True,
        )
        log.close()
        os.close(req_r)
        os.close(res_w)
        files_c.close()
        self.ep = Endpoint(res_r, req_w, self.key, sock=files_p)
        self.ep.wait = self._wait
        self.deadline = math.inf
        self.peak_rss = 0
        self.mem_cap = int(_default_mem_cap())
        self.assigned = False
        self.swept: list[int] = []
        os.write(req_w, self.key)
        if task is not None:
            self.assign(task, opts)

    def assign(self, task: Task, opts: EvalOptions) -> None:
        if self.assigned:  # one candidate per process, ever (issue 17)
            raise RuntimeError("this child already has a job; a child serves one evaluation only")
        self.assigned = True
        self.mem_cap = int((opts.mem_cap_gb * 2**30) if opts.mem_cap_gb else _default_mem_cap())
        # The child caps its own address space before importing anything of the candidate's (CPU
        # only: CUDA reserves huge virtual ranges); the RSS watchdog in _wait is the backstop.
        self.ep.send({"task_root": str(self.stage(task.root)), "entry": task.entry, "dtype": task.dtypes[0],
                      "dsl": task.dsl,
                      "on_gpu": self.on_gpu, "rlimit_as": None if self.on_gpu else self.mem_cap + 8 * 2**30})

    def stage(self, path: Path) -> Path:
        """A copy of a file or folder where the child can read it (the sandbox hides /tmp and the
        homes) but not change it. The parent keeps using the original. A file comes with the
        modules next to it that it imports (a helper module beside a candidate)."""
        path = Path(path)
        dst = self.staged / f"{len(list(self.staged.iterdir()))}" / path.name
        if path.is_dir():
            shutil.copytree(path, dst, ignore=shutil.ignore_patterns("__pycache__", ".git"))
            return dst
        dst.parent.mkdir(parents=True)
        shutil.copyfile(path, dst)
        todo, seen = [path], {path.name}
        while todo:
            for name in _local_imports(todo.pop()):
                for sib in (path.parent / f"{name}.py", path.parent / name):
                    if sib.name in seen or not sib.exists():
                        continue
                    seen.add(sib.name)
                    if sib.is_dir():
                        shutil.copytree(sib, dst.parent / sib.name, ignore=shutil.ignore_patterns("__pycache__"))
                    else:
                        shutil.copyfile(sib, dst.parent / sib.name)
                        todo.append(sib)
        return dst

    def leftover_processes(self) -> list[str]:
        """Processes of this child still running besides the child itself (candidate code that
        started one and left it behind), as 'pid name' strings."""
        if self.proc.poll() is not None:
            return []
        out = []
        for pid in descendants(self.proc.pid):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name, state = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:][:1]
            if state == "Z" or name == "bwrap":
                continue
            out.append((pid, name))
        # The child itself: the first non-bwrap process under the sandbox, or none without it.
        if self.sandboxed and out:
            out = out[1:]
        return [f"{pid} {name}" for pid, name in out]

    def _wait(self, fd: int) -> None:
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ChildFailed("timeout", "")
            r, _, _ = select.select([fd], [], [], min(left, 0.2))
            # The memory watchdog reads /proc at most 20 times a second: a large output arrives in
            # thousands of reads, and a /proc read before each was most of the transfer's time.
            now = time.monotonic()
            if now - self._rss_checked < 0.05:
                if r:
                    return
                continue
            self._rss_checked = now
            rss = _tree_rss(self.proc.pid)
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.mem_cap:
                self.kill()
                raise ChildFailed("memory-cap", f"used {rss / 2**30:.1f} GiB of host memory, over the cap of "
                                                f"{self.mem_cap / 2**30:.1f} GiB")
            if r:
                return

    def start(self, timeout: float) -> dict:
        """Wait for the child's setup answer (sent before any candidate code is imported)."""
        return self.request(None, timeout)[0]

    def request(self, req: dict | None, timeout: float | None) -> tuple[dict, list]:
        # None: the caller built EvalOptions without a task-derived limit (benches); the GPU default.
        self.deadline = time.monotonic() + (timeout if timeout is not None else 120.0)
        try:
            if req is not None:
                self.ep.send(req)
            t0 = time.monotonic()
            reply, tensors = self.ep.recv()
            # Seconds the child spent on the op vs the whole round trip (the rest is the channel).
            self.busy_s += float(reply.get("child_s") or 0.0)
            self.round_trip_s += time.monotonic() - t0
        except Forged as e:
            self.kill()
            raise ChildFailed("result-channel-forged", f"{e}; something in the candidate's process wrote to the "
                                                       "harness's private result channel") from None
        except ChildFailed as e:
            if e.rule == "timeout":
                raise ChildFailed("timeout", f"no answer within {timeout:.0f} s (op {(req or {}).get('op', 'setup')}); "
                                             "the child was killed") from None
            raise
        except (ChannelError, BrokenPipeError, OSError):
            rc = self.proc.wait(timeout=10) if self.proc.poll() is None else self.proc.returncode
            raise ChildFailed("crashed", f"the child process {_describe_exit(rc)}") from None
        return reply, tensors

    def output(self) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        if len(text) > OUTPUT_HEAD + OUTPUT_TAIL:
            cut = len(text) - OUTPUT_HEAD - OUTPUT_TAIL
            text = text[:OUTPUT_HEAD] + f"\n[... {cut} characters cut ...]\n" + text[-OUTPUT_TAIL:]
        return text

    def kill(self) -> list[int]:
        """Kill the child and everything it started. Sandboxed: the pid namespace's init dies with
        bwrap, and the kernel kills every process in it. Without the sandbox: its process group,
        then a sweep for processes carrying its marker (a hint: setsid/pty.fork leave the group)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the child's own session: its helpers too
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait()
        if not self.sandboxed:
            return sweep(self.marker, exclude=set())
        return []

    def close(self) -> None:
        if self.proc.poll() is None and self.assigned:  # (a spare has no job to say goodbye to)
            try:
                self.deadline = time.monotonic() + 10
                self.ep.send({"op": "bye"})
                self.ep.recv()
            except Exception:  # noqa: BLE001
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.swept = self.kill()
        for fd in (self.ep.rfd, self.ep.wfd):
            try:
                os.close(fd)
            except OSError:
                pass
        if self.ep.sock is not None:
            self.ep.sock.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


def _local_imports(path: Path) -> set[str]:
    """Top-level module names a Python file imports (to stage the local ones with it)."""

    try:
        tree = ast.parse(path.read_text())
    except (SyntaxError, UnicodeDecodeError, OSError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def derive_seed(secret: int, *parts: Any) -> int:
    h = hashlib.sha256(repr((secret,) + parts).encode()).digest()
    return int.from_bytes(h[:7], "big")



@dataclass
class _Run:
    """Mutable state of one evaluation, turned into the verdict dict at the end."""

    task: Task
    candidate: Path
    reasons: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    stage: str = "done"
    shapes: list[dict] = field(default_factory=list)
    output: str = ""
    # Where the timing phase's wall time went (prep, batch, fetch, check, ...), summed over shapes:
    # the throughput benchmark prints it (issue 18).
    timing_parts_s: dict[str, float] = field(default_factory=dict)

    def reject(self, stage: str, rule: str, message: str) -> None:
        order = ["static", "import", "correctness", "guard", "timing", "done"]
        if order.index(stage) < order.index(self.stage):
            self.stage = stage
        if not any(r["rule"] == rule and r["message"] == message for r in self.reasons):
            self.reasons.append({"rule": rule, "message": message})

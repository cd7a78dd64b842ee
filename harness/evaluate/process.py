"""The child process side of the parent: spawn a child with scrubbed env, private pipes, its own
scratch folder, a deadline and a memory watchdog; talk to it; kill it and what it started. Also the
per-run seed and the evaluation's mutable state (_Run) the stages write into.

Layers of harness.evaluate (import-linter, pyproject.toml): runner -> stages (correctness, heldout,
timing_stage, parent_clock) -> process (this module) -> sandbox, channel, verdict. Nothing here imports
a stage or the runner.
"""
from __future__ import annotations

import ast
import errno
import hashlib
import math
import os
import re
import secrets
import select
import socket
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.evaluate import trace
from harness.evaluate.channel import ChannelError, Endpoint, Forged, Malformed, widen_pipe
from harness.evaluate.sandbox import (REPO_ROOT, descendants, disabled_by_user, memory_cgroup, scratch_bytes, sweep,
                                      tmpfs_mounts, tmpfs_used, wrap)
from harness.authoring.tasks import Task

OUTPUT_HEAD, OUTPUT_TAIL = 2000, 6000  # bytes of the child's output a verdict shows: its start and end
# Bytes of stdout+stderr a child may write in all before it is stopped (rule output-flood): far above
# what an honest kernel prints (a warning or two), far below what would cost the parent anything.
OUTPUT_CAP = 8 << 20

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
    # call_timeout_s on the GPU, interpreter_call_timeout_s in the interpreter (harness.authoring.tasks).
    run_timeout_s: float | None = None
    mem_cap_gb: float | None = None      # None: half the machine's RAM, at most 64 GiB
    seed: int | None = None              # secret per-run seed when None (secrets.randbits)
    shapes: list[str] | None = None      # subset by name (default: every shape for the device)
    samples: int = 40                    # timed samples per side per shape, of the measurement that decides
    # The first measurement's samples (issue 35): a screen. Only a promising candidate (timing_stage.promising)
    # is measured again, in fresh processes with `samples`, and that second measurement alone decides; the
    # rest (most of what a search tries) is told apart from a win in a third of the time. None or >= samples:
    # one measurement of `samples`, as before.
    screen_samples: int | None = 12
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


def _tree_memory(pid: int, mounts: dict[str, int]) -> int:
    """Host memory a process and everything under it hold: resident memory (the sandbox's bwrap, the
    child, and any process candidate code starts: a forked helper must not escape the memory cap), plus
    what its sandbox's tmpfs mounts hold (files there are memory no RSS counts: /dev/shm, the scratch
    folder), seen through the first process under bwrap, the sandbox's init."""
    kids = descendants(pid)
    rss = _rss_bytes(pid) + sum(_rss_bytes(p) for p in kids)
    return rss + (tmpfs_used(kids[0], mounts) if kids and mounts else 0)


def _ns_pid(pid: int) -> int | None:
    """A process's pid in its own (innermost) pid namespace, from /proc/PID/status's NSpid line."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _default_mem_cap() -> float:
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 16 * 2**30
    return min(total / 2, 64 * 2**30)


class BoundedOutput:
    """The child's stdout and stderr, read from a pipe: the first and last bytes kept, the rest only
    counted. Why a pipe: a file on the host had no size cap and was read whole (a 2 GiB flood took
    the parent from 0.25 to 4.4 GB), and the usual cap on a file, RLIMIT_FSIZE, would also limit the
    child's memfds and scratch files (outputs of gigabytes travel as memfds). The parent drains the
    pipe while it waits on the child (ChildProcess._wait), never more than OUTPUT_CAP bytes; when
    nobody drains it, a writer in the child blocks, which costs only the child's own time."""

    HEAD, TAIL = OUTPUT_HEAD, OUTPUT_TAIL  # bytes kept of the start and of the end

    def __init__(self, fd: int):
        self.fd = fd
        os.set_blocking(fd, False)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.open = True

    def drain(self) -> None:
        """Read what is there now (never blocks), up to OUTPUT_CAP in all."""
        while self.open and self.total <= OUTPUT_CAP:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:
                self.close()
                return
            self.total += len(data)
            room = self.HEAD - len(self.head)
            if room > 0:
                self.head += data[:room]
                data = data[room:]
            self.tail += data
            del self.tail[:-self.TAIL]

    @property
    def flooded(self) -> bool:
        return self.total > OUTPUT_CAP

    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return (self.head + self.tail).decode("utf-8", "replace")
        return (self.head.decode("utf-8", "replace") + f"\n[... {cut} bytes cut ...]\n"
                + self.tail.decode("utf-8", "replace"))

    def close(self) -> None:
        if self.open:
            self.open = False
            os.close(self.fd)


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
        # The scratch folder: the only place the child may write (its cwd, HOME, TMPDIR, Triton cache: a
        # cache of its own, so a candidate can't plant binaries that later evaluations load); the staged
        # folder: the task and the files it imports, read-only to it. Both named at random, per child:
        # the layout is no sign of the harness that a kernel could test for.
        self.tmp = Path(tempfile.mkdtemp())
        self.scratch = self.tmp / secrets.token_hex(6)
        self.cwd = self.scratch / "cwd"
        self.staged = self.tmp / secrets.token_hex(6)
        # Modules beside a staged file come with it (stage()); the runner turns it off when the static
        # stage runs, which never read them. Why each one was refused: said in an import error.
        self.stage_siblings = True
        self.unstaged: list[str] = []
        for d in (self.cwd, self.scratch / "home", self.scratch / "tmp", self.scratch / "triton", self.scratch / "cute",
                  self.staged):
            d.mkdir(parents=True)
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
                   XDG_CACHE_HOME=str(self.scratch / "home" / ".cache"))
        if not self.sandboxed:  # (the sandbox's pid namespace finds its processes: no marker to read there)
            env["WARPSMITH_EVAL_MARK"] = self.marker
        argv = [opts.python, "-m", "harness.evaluate.child", str(req_r), str(res_w), str(files_c.fileno())]
        # Counted in the memory cap with its RSS: files in the sandbox's tmpfs mounts are memory too.
        self.tmpfs: dict[str, int] = {}
        if self.sandboxed:
            # The scratch folder a sized tmpfs (the host folders above stay empty mount points): a
            # candidate can't fill the host's disk, and what it writes there counts as its memory.
            size = scratch_bytes()
            argv = wrap(argv, self.scratch, gpu=on_gpu, python=opts.python, readonly=[str(self.staged)],
                        chdir=self.cwd, scratch_size=size, scratch_dirs=["cwd", "home", "tmp", "triton", "cute"])
            self.tmpfs = tmpfs_mounts(self.scratch, size)
        self.tmpfs_counted = False  # from the child's hello on: before it, bwrap may still be building the mounts
        self.mem_cap = int(_default_mem_cap())  # (assign sets the evaluation's)
        # Where the kernel allows it (a cgroup v2 of this process's own: sandbox.memory_cgroup), a cgroup
        # per child whose memory.max counts all of its memory; the child joins it before it execs bwrap.
        self.cgroup = _child_cgroup(self.mem_cap)
        if self.cgroup is not None:
            argv = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(self.cgroup / "cgroup.procs"), *argv]
        out_r, out_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                argv, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
                stdout=out_w, stderr=out_w, pass_fds=(req_r, res_w, files_c.fileno()), start_new_session=True,
            )
        finally:
            os.close(out_w)
        self.out = BoundedOutput(out_r)
        os.close(req_r)
        os.close(res_w)
        files_c.close()
        self.ep = Endpoint(res_r, req_w, self.key, sock=files_p)
        self.ep.wait = self._wait
        self.deadline = math.inf
        self.peak_rss = 0
        self.assigned = False
        self.swept: list[int] = []
        self.own_pids: set[int] = set()  # bwrap, its init and the child, by pid (from the child's hello)
        os.write(req_w, self.key)
        if task is not None:
            self.assign(task, opts)

    def assign(self, task: Task, opts: EvalOptions) -> None:
        if self.assigned:  # one candidate per process, ever (issue 17)
            raise RuntimeError("this child already has a job; a child serves one evaluation only")
        self.assigned = True
        self.mem_cap = int((opts.mem_cap_gb * 2**30) if opts.mem_cap_gb else _default_mem_cap())
        if self.cgroup is not None:  # (a spare was started under the default cap)
            _write(self.cgroup / "memory.max", str(self.mem_cap))
        # The child caps its own address space before importing anything of the candidate's (CPU
        # only: CUDA reserves huge virtual ranges); the RSS watchdog in _wait is the backstop.
        self.ep.send({"task_root": str(self.stage(task.root)), "entry": task.entry, "dtype": task.dtypes[0],
                      "dsl": task.dsl,
                      "on_gpu": self.on_gpu, "rlimit_as": None if self.on_gpu else self.mem_cap + 8 * 2**30})

    def stage(self, path: Path) -> Path:
        """A copy of a file or folder where the child can read it (the sandbox hides /tmp and the
        homes) but not change it, in a folder named at random (no path tells the harness's call from
        a user's by its layout). The parent keeps using the original. A file comes with the modules
        beside it that it imports, where stage_siblings allows (harness code and tests that import a
        helper, and evaluations without the static stage): regular files of its own folder only, never
        followed through a symbolic link (see _copy_sibling)."""
        path = Path(path)
        dst = self.staged / secrets.token_hex(6) / path.name
        if path.is_dir():  # the task's folder: the user's own, trusted like their task.toml
            shutil.copytree(path, dst, ignore=shutil.ignore_patterns("__pycache__", ".git"))
            return dst
        dst.parent.mkdir(parents=True)
        shutil.copyfile(path, dst)  # (the file the caller named: resolved by the runner)
        if not self.stage_siblings:
            return dst
        folder = path.resolve().parent
        todo, seen = [path], {path.name}
        while todo:
            for name in sorted(_local_imports(todo.pop())):
                sib = folder / f"{name}.py"
                if sib.name in seen or not name.isidentifier():
                    continue
                seen.add(sib.name)
                why = _copy_sibling(sib, dst.parent / sib.name)
                if why is None:
                    todo.append(sib)
                elif why:
                    self.unstaged.append(f"{sib.name} ({why})")
        return dst

    def leftover_processes(self) -> list[str]:
        """Processes of this child still running besides the harness's own (candidate code that
        started one and left it behind), as 'pid name' strings. Found by pid, never by name: a
        process can call itself anything (prctl PR_SET_NAME "bwrap")."""
        if self.proc.poll() is not None or not self.own_pids:  # (no hello: no candidate code ran)
            return []
        out = []
        for pid in descendants(self.proc.pid):
            if pid in self.own_pids:
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            name, state = stat[stat.find("(") + 1:stat.rfind(")")], stat[stat.rfind(")") + 2:][:1]
            if state != "Z":
                out.append(f"{pid} {name}")
        return out

    def _note_own_pids(self, hello: dict) -> None:
        """The harness's processes, known by pid when the child says hello (before any candidate code
        runs): bwrap, the sandbox's init (pid 1 of its pid namespace) and the child (the pid it reports,
        in that namespace, read from each process's NSpid line)."""
        own = {self.proc.pid}
        pid = hello.get("pid")
        if self.sandboxed and type(pid) is int:
            for p in descendants(self.proc.pid):
                if _ns_pid(p) in (1, pid):
                    own.add(p)
        self.own_pids = own

    def _wait(self, fd: int) -> None:
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ChildFailed("timeout", "")
            r, _, _ = select.select([fd] + ([self.out.fd] if self.out.open else []), [], [], min(left, 0.2))
            if self.out.open and self.out.fd in r:
                self._drain_output()
            # The memory watchdog reads /proc at most 20 times a second: a large output arrives in
            # thousands of reads, and a /proc read before each was most of the transfer's time.
            now = time.monotonic()
            if now - self._rss_checked < 0.05:
                if fd in r:
                    return
                continue
            self._rss_checked = now
            rss = _tree_memory(self.proc.pid, self.tmpfs if self.tmpfs_counted else {})
            self.peak_rss = max(self.peak_rss, rss)
            if rss > self.mem_cap:
                self.kill()
                raise ChildFailed("memory-cap", f"used {rss / 2**30:.1f} GiB of host memory (its processes' "
                                                "resident memory and the files in its tmpfs mounts), over the "
                                                f"cap of {self.mem_cap / 2**30:.1f} GiB")
            if fd in r:
                return

    def _drain_output(self) -> None:
        self.out.drain()
        if self.out.flooded:
            self.kill()
            raise ChildFailed("output-flood", f"the child wrote more than {OUTPUT_CAP >> 20} MiB to stdout/stderr "
                                              "(a kernel's call should print nothing, a warning at most); it was "
                                              "stopped there, and the verdict keeps the head and tail of it")

    def start(self, timeout: float) -> dict:
        """Wait for the child's setup answer (sent before any candidate code is imported)."""
        hello = self.request(None, timeout)[0]
        # The sandbox is built (the child runs in it): its tmpfs mounts are its own, and count.
        self.tmpfs_counted = True
        self._note_own_pids(hello)
        return hello

    def request(self, req: dict | None, timeout: float | None) -> tuple[dict, list]:
        """Send `req` (None: wait for the hello) and return the child's reply and tensors, checked
        against the op's schema (harness/evaluate/replies.py) before any reader sees them."""
        # (pydantic and the schemas: ~0.1 s, paid by the first evaluation, not by every command's start)
        from harness.evaluate import replies

        op = (req or {}).get("op")
        # None: the caller built EvalOptions without a task-derived limit (benches); the GPU default.
        self.deadline = time.monotonic() + (timeout if timeout is not None else 120.0)
        try:
            with trace.span("request", op=op or "setup", role=(req or {}).get("role"), dims=(req or {}).get("dims")) as tr:
                if req is not None:
                    self.ep.send(req)
                t0 = time.monotonic()
                reply, tensors = self.ep.recv()
                why = replies.problem(op, req, reply, len(tensors))
                if why:
                    raise Malformed(why)
                tr.update(child_s=reply.get("child_s"), parts=reply.get("parts"))
            # Seconds the child spent on the op vs the whole round trip (the rest is the channel).
            self.busy_s += float(reply.get("child_s") or 0.0)
            self.round_trip_s += time.monotonic() - t0
        except Forged as e:
            self.kill()
            raise ChildFailed("result-channel-forged", f"{e}; something in the candidate's process wrote to the "
                                                       "harness's private result channel") from None
        except Malformed as e:
            self.kill()
            raise ChildFailed("malformed-reply", f"the child's reply to `{op or 'setup'}`: {e}; the harness's "
                                                 "child never sends that: code in its process wrote to the private "
                                                 "result channel (with the key it found there)") from None
        except ChildFailed as e:
            if e.rule == "timeout":
                raise ChildFailed("timeout", f"no answer within {timeout:.0f} s (op {op or 'setup'}); "
                                             "the child was killed") from None
            raise
        except (ChannelError, BrokenPipeError, OSError):
            rc = self.proc.wait(timeout=10) if self.proc.poll() is None else self.proc.returncode
            if self.oom_killed():
                raise ChildFailed("memory-cap", f"the kernel stopped it at its cgroup's memory limit of "
                                                f"{self.mem_cap / 2**30:.1f} GiB (all of its memory: processes, "
                                                "files in memory, shared memory)") from None
            raise ChildFailed("crashed", f"the child process {_describe_exit(rc)}") from None
        return reply, tensors

    def oom_killed(self) -> bool:
        """The kernel killed a process of the child's cgroup at its memory.max (memory.events)."""
        if self.cgroup is None:
            return False
        try:
            events = dict(line.split() for line in (self.cgroup / "memory.events").read_text().splitlines())
            return int(events.get("oom_kill", 0)) > 0
        except (OSError, ValueError):
            return False

    def output(self) -> str:
        """The head and tail of what the child printed (what is in the pipe now read too, never more than
        OUTPUT_CAP in all)."""
        self.out.drain()
        return self.out.text()

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
        self.out.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self.cgroup is not None:  # empty once the pid namespace is torn down (it may take a moment)
            for _ in range(20):
                try:
                    self.cgroup.rmdir()
                except OSError as e:
                    if e.errno == errno.EBUSY:  # (processes still in it)
                        time.sleep(0.05)
                        continue
                break


def _write(path: Path, text: str) -> bool:
    try:
        path.write_text(text)
        return True
    except OSError:
        return False


def _child_cgroup(mem_cap: int) -> Path | None:
    """A cgroup of its own for a child, its memory.max at the cap and no swap to hide in, or None where
    there is no cgroup of this process's own to make it in (sandbox.memory_cgroup says why)."""
    base, _ = memory_cgroup()
    if base is None:
        return None
    cg = base / f"warpsmith-eval-{secrets.token_hex(6)}"
    try:
        cg.mkdir()
    except OSError:
        return None
    if not _write(cg / "memory.max", str(mem_cap)):
        cg.rmdir()
        return None
    _write(cg / "memory.swap.max", "0")  # (absent without swap accounting: the cap still holds)
    return cg


SIBLING_MAX_BYTES = 16 << 20  # a module beside a candidate larger than this is no helper module


def _copy_sibling(src: Path, dst: Path) -> str | None:
    """Copy a module beside a candidate if it is a regular file of that folder: None when copied, ""
    when there is none, else why not. Opened with O_NOFOLLOW and checked with fstat on the open file,
    so a symbolic link (to a secret the parent may read and the sandbox hides), a fifo or a device is
    refused, and nothing can swap the file between the check and the read."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return ""
    except OSError as e:
        return "a symbolic link" if e.errno == errno.ELOOP else f"unreadable: {e.strerror}"
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        if st.st_size > SIBLING_MAX_BYTES:
            return f"{st.st_size} bytes: larger than a helper module"
        os.set_blocking(f.fileno(), True)
        dst.write_bytes(f.read(SIBLING_MAX_BYTES + 1))
    return None


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

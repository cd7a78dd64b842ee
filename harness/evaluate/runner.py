"""The parent side of an evaluation: spawn the child, drive it, judge what comes back.

The parent never imports candidate code. It generates every input from a secret per-run seed,
computes the reference on its own copy, and compares; the child only runs the candidate and
reports raw outputs plus what its guards saw. Stages, cheap first: static -> import ->
correctness -> guard -> timing. The verdict is a plain dict (see DESIGN.md, "Verdict").
"""
from __future__ import annotations

import hashlib
import math
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, is_dataclass, replace
from pathlib import Path
from typing import Any

from harness.evaluate import verdict as vd
from harness.evaluate.channel import ChannelError, Endpoint, Forged, widen_pipe
from harness.tasks import Shape, Task

REPO_ROOT = Path(__file__).resolve().parents[2]
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
    # Held-out shapes and hard inputs (harness.evaluate.heldout), correctness only. Off: only for
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
    from harness.evaluate.sandbox import disabled_by_user

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
    from harness.evaluate.sandbox import descendants

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
        self.key = secrets.token_bytes(32)
        env = scrubbed_env(on_gpu=on_gpu, home=str(self.scratch / "home"))
        # CUTE_DSL_CACHE_DIR: CuTe DSL's compile cache, like Triton's one of its own per child.
        env.update(TMPDIR=str(self.scratch / "tmp"), TRITON_CACHE_DIR=str(self.scratch / "triton"),
                   CUTE_DSL_CACHE_DIR=str(self.scratch / "cute"),
                   XDG_CACHE_HOME=str(self.scratch / "home" / ".cache"), WARPSMITH_EVAL_MARK=self.marker)
        argv = [opts.python, "-m", "harness.evaluate.child", str(req_r), str(res_w)]
        if self.sandboxed:
            from harness.evaluate.sandbox import wrap

            argv = wrap(argv, self.scratch, gpu=on_gpu, python=opts.python, readonly=[str(self.staged)],
                        chdir=self.cwd)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            argv, cwd=self.cwd, env=env, stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, pass_fds=(req_r, res_w), start_new_session=True,
        )
        log.close()
        os.close(req_r)
        os.close(res_w)
        self.ep = Endpoint(res_r, req_w, self.key)
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
        from harness.evaluate.sandbox import descendants

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

    @classmethod
    def for_task(cls, task: Task, on_gpu: bool, opts: EvalOptions) -> "ChildProcess":
        """A child for one evaluation, pre-warmed where possible (harness/evaluate/prewarm.py): a
        process no candidate code has run in, never handed out twice."""
        from harness.evaluate.prewarm import POOL

        return POOL.take(task, on_gpu, opts)

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
            from harness.evaluate.sandbox import sweep

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
        shutil.rmtree(self.tmp, ignore_errors=True)


def _local_imports(path: Path) -> set[str]:
    """Top-level module names a Python file imports (to stage the local ones with it)."""
    import ast

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


def close_spares() -> None:
    """End this process's pre-warmed children (they also end at exit: prewarm.close)."""
    from harness.evaluate.prewarm import POOL

    POOL.close()


def derive_seed(secret: int, *parts: Any) -> int:
    h = hashlib.sha256(repr((secret,) + parts).encode()).digest()
    return int.from_bytes(h[:7], "big")


def _violation_dict(v: Any) -> dict:
    if is_dataclass(v) and not isinstance(v, type):
        d = asdict(v)
    elif isinstance(v, dict):
        d = dict(v)
    else:
        d = {k: getattr(v, k, None) for k in ("rule", "message", "line", "col", "snippet", "severity")}
    return d


def run_static(task: Task, source: str, extra_rules: list[str] = ()) -> tuple[list[dict] | None, str]:
    """The static stage (harness.guard). (None, why) when the guard can't be imported here."""
    try:
        from harness.guard import check_source, rules_for_task  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001 - e.g. tree_sitter missing on a bare GPU box
        return None, f"static stage skipped: harness.guard.check_source unavailable ({type(e).__name__}: {e})"
    try:
        found = check_source(source, task, rules_for_task(task, extra=extra_rules))
    except Exception as e:  # noqa: BLE001 - e.g. a rules pack the task names is missing
        # The runtime guards still run; the verdict says loudly that this stage did not.
        return None, f"static stage could not run: {type(e).__name__}: {e}"
    return [_violation_dict(v) for v in found], ""


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

    def reject(self, stage: str, rule: str, message: str) -> None:
        order = ["static", "import", "correctness", "guard", "timing", "done"]
        if order.index(stage) < order.index(self.stage):
            self.stage = stage
        if not any(r["rule"] == rule and r["message"] == message for r in self.reasons):
            self.reasons.append({"rule": rule, "message": message})


def _on_gpu(opts: EvalOptions) -> bool:
    if opts.on_gpu is not None:
        return opts.on_gpu
    import torch

    return bool(torch.cuda.is_available())


def _select_shapes(task: Task, on_gpu: bool, names: list[str] | None) -> list[Shape]:
    from harness.tasks import TaskError

    shapes = task.shapes_for(on_gpu)
    if not names:
        return shapes
    by = {s.name: s for s in task.shapes + task.interpreter_shapes}
    missing = [n for n in names if n not in by]
    if missing:
        raise TaskError(task.toml_path, "shapes", f"no shape named {', '.join(map(repr, missing))} "
                                                  f"(known: {', '.join(by)})")
    return [by[n] for n in names]


def evaluate(task: Task, candidate: Path, incumbent: Path | None = None,
             options: EvalOptions | None = None) -> dict:
    opts = options or EvalOptions()
    t0 = time.monotonic()
    candidate = Path(candidate).resolve()
    if not candidate.is_file():
        raise FileNotFoundError(f"{candidate}: no such candidate file")
    incumbent = Path(incumbent).resolve() if incumbent else task.baseline_path.resolve()
    if not incumbent.is_file():
        raise FileNotFoundError(f"{incumbent}: no such incumbent file")
    on_gpu = _on_gpu(opts)
    if opts.run_timeout_s is None:
        opts = replace(opts, run_timeout_s=task.call_timeout_for(on_gpu))
    shapes = _select_shapes(task, on_gpu, opts.shapes)
    source = candidate.read_text()
    run = _Run(task, candidate)
    v: dict[str, Any] = {
        "accepted": False, "stage": "static", "reasons": run.reasons, "task": task.name,
        "candidate": str(candidate), "incumbent": str(incumbent),
        "candidate_sha256": hashlib.sha256(source.encode()).hexdigest(),
        "device": "cpu (Triton interpreter)", "timing_available": False, "shapes": run.shapes,
        "geomean_speedup": None, "noise_band_pct": None, "recommendation": None, "wall_s": 0.0,
        "violations": [], "notes": run.notes, "output": "", "sandbox": bool(opts.sandbox),
        "call_timeout_s": opts.run_timeout_s, "heldout": [], "hard_cases": [],
    }
    if opts.sandbox:
        from harness.evaluate import sandbox

        works, why, _ = sandbox.probe()
        if not works:
            # Fail closed: candidate code never runs unconfined unless someone said so.
            run.reject("import", "sandbox-unavailable", why)
            return _finish(v, run, t0, timing_available=False)
    else:
        run.notes.append("sandbox off (--no-sandbox): candidate code ran with this user's privileges, files "
                         "and network")

    if opts.static:
        violations, why = run_static(task, source, opts.extra_rules)
        if violations is None:
            # Fail closed: a verdict without the static stage would accept what the rules forbid.
            fix = ("fix or deselect the rules pack it names" if why.startswith("static stage could not run")
                   else "install warpsmith's dependencies (tree-sitter, tree-sitter-python)")
            run.reject("static", "static-unavailable",
                       f"{why}; {fix}, or pass static=False / --no-static to evaluate without static "
                       "checks, knowingly")
            return _finish(v, run, t0, timing_available=False)
        v["violations"] = violations
        errors = [viol for viol in violations if viol.get("severity", "error") == "error"]
        for viol in errors:
            msg, line = str(viol.get("message")), viol.get("line")
            where = f" (line {line})" if line and f"line {line}" not in msg else ""  # (unless it says so)
            run.reject("static", f"static:{viol.get('rule')}", msg + where)
        for viol in violations:
            if viol not in errors:  # warnings go to the agent and the person, not into the decision
                run.notes.append(f"static warning: {viol.get('rule')}: {viol.get('message')} (line {viol.get('line')})")
        if errors:
            return _finish(v, run, t0, timing_available=False)

    from harness.dsl_support import dsl_problem

    problem = dsl_problem(task, on_gpu)
    if problem:  # no child could run it (warpsmith eval says so before it gets here, exit 2)
        run.reject("import", "dsl-unavailable", problem)
        return _finish(v, run, t0, timing_available=False)

    hashes = task.file_hashes()
    saved = {p: (task.root / p).read_bytes() for p in hashes}
    run.stage = "done"
    secret = opts.seed if opts.seed is not None else secrets.randbits(63)
    timing_available = False
    try:
        timing_available = _evaluate_in_child(run, v, task, candidate, incumbent, shapes, on_gpu, opts, secret)
    finally:
        after = task.file_hashes()
        changed = sorted(p for p in set(hashes) | set(after) if hashes.get(p) != after.get(p))
        if changed:
            run.reject(run.stage if run.stage != "done" else "guard", "task-files-unchanged",
                       f"task files changed during the run: {', '.join(changed)} (restored from the copy "
                       "taken before the run)")
            _restore(task.root, saved, after)
    from harness.evaluate import keep_policy

    return keep_policy.apply(_partial(_finish(v, run, t0, timing_available), task, on_gpu, shapes), task,
                             heldout_checked=opts.heldout)


def _partial(v: dict, task: Task, on_gpu: bool, shapes: list[Shape]) -> dict:
    """A verdict on a subset of the shapes (eval --shapes, for debugging) says so and is never a
    keep: a candidate can win on the shapes it was shown and lose on the long ones it skipped."""
    ran = {s.name for s in shapes}
    skipped = [s.name for s in task.shapes_for(on_gpu) if s.name not in ran]
    if not skipped:
        return v
    v["partial"] = skipped
    v["notes"].append(f"partial verdict: shapes not run: {', '.join(skipped)} (--shapes)")
    rec = v.get("recommendation") or {}
    if rec.get("action") == "keep":
        v["recommendation"] = {**rec, "action": "revert", "can_keep": False,
                               "reason": f"not every shape was run (skipped: {', '.join(skipped)}); "
                                         "a keep needs all of them"}
    return v


def _restore(root: Path, saved: dict[str, bytes], after: dict[str, str]) -> None:
    for p, data in saved.items():
        (root / p).write_bytes(data)
    for p in set(after) - set(saved):
        try:
            (root / p).unlink()
        except OSError:
            pass


def _finish(v: dict, run: _Run, t0: float, timing_available: bool) -> dict:
    if not run.reasons:
        run.stage = "done"
    v["stage"] = run.stage if run.reasons else "done"
    v["accepted"] = not run.reasons
    v["timing_available"] = timing_available
    v["output"] = run.output
    correct = all(s.get("correct") for s in run.shapes) and bool(run.shapes)
    slower = [s["name"] for s in run.shapes if s.get("speedup") and s.get("noise_pct")
              and (s["speedup"] - 1) * 100 < -s["noise_pct"]]
    rec = vd.recommend(correct=correct and v["accepted"], guards_ok=v["accepted"],
                       timing_available=timing_available, geomean_speedup=v["geomean_speedup"],
                       noise_band_pct=v["noise_band_pct"], slower_shapes=slower,
                       note=(f"{run.reasons[0]['rule']}: {run.reasons[0]['message'].splitlines()[0]}"
                             + (f" (+{len(run.reasons) - 1} more)" if len(run.reasons) > 1 else ""))
                       if run.reasons else v.pop("_rec_note", ""))
    v.pop("_rec_note", None)
    v["recommendation"] = rec
    v["wall_s"] = round(time.monotonic() - t0, 3)
    return v


def _evaluate_in_child(run: _Run, v: dict, task: Task, candidate: Path, incumbent: Path, shapes: list[Shape],
                       on_gpu: bool, opts: EvalOptions, secret: int) -> bool:
    from harness.evaluate import correctness

    ref_mod = task.load_reference()
    run.stage = "import"
    child = ChildProcess.for_task(task, on_gpu, opts)
    timing_ok = on_gpu and opts.time
    # Wall seconds per phase in the verdict: where an evaluation's time goes, on any machine.
    phases: dict[str, float] = v.setdefault("phases_s", {})
    # Of each phase, the seconds the child was working (the rest: the parent's reference, the
    # transfer and the comparison of outputs, and waiting for a start).
    busy: dict[str, float] = v.setdefault("child_busy_s", {})
    last = [time.monotonic(), 0.0]

    def mark(name: str) -> None:
        now = time.monotonic()
        phases[name] = round(phases.get(name, 0.0) + now - last[0], 3)
        busy[name] = round(busy.get(name, 0.0) + child.busy_s - last[1], 3)
        last[0], last[1] = now, child.busy_s

    try:
        try:
            hello = child.start(opts.import_timeout_s)
        except ChildFailed as e:
            run.output = child.output()
            run.reject("import", e.rule, f"the harness's child failed before any candidate code ran: {e.message}")
            return False
        if not hello.get("ok"):
            run.output = child.output()
            run.reject("import", "setup-failed", f"{hello.get('error')}\n{hello.get('traceback', '')}".strip())
            return False
        mark("spawn")
        v["child_startup_s"] = hello.get("startup_s")
        from harness.evaluate.prewarm import describe

        v["child_start"] = describe(child, hello)
        dev, _ = child.request({"op": "device"}, opts.import_timeout_s)
        mark("device")
        v["device"] = dev.get("name", v["device"])
        v["device_info"] = {k: dev[k] for k in dev if k != "ok"}
        # The incumbent is never imported here: the timing stage runs it in a child of its own,
        # which the candidate never shares (parent_clock.py).
        baseline: dict[str, float] = {}
        r, _ = child.request({"op": "import", "role": "candidate", "path": str(child.stage(candidate))},
                             opts.import_timeout_s)
        if not r.get("ok"):
            run.output = child.output()
            detail = f" ({r['detail']})" if r.get("detail") not in (None, "exception") else ""
            run.reject("import", "import-error", f"{r.get('error')}{detail}\n{r.get('traceback', '')}".strip())
            return False
        run.stage = "done"  # (before the import's guard findings, so the verdict's stage says "guard")
        if r.get("patched"):
            run.reject("guard", "harness-patched", "importing the candidate replaced functions the harness relies "
                                                   "on: " + ", ".join(r["patched"][:8]))
        for o in r.get("observed", []):  # guards that watched the import (no-introspection, no-threads)
            run.reject("guard", o["rule"], "[import] " + o["message"])
        mark("import")
        ok = correctness.check_all(run, child, task, ref_mod, shapes, on_gpu, opts, secret)
        mark("correctness")
        if ok and opts.heldout:
            from harness.evaluate import heldout

            ok = heldout.check(run, v, child, task, ref_mod, shapes, on_gpu, opts, secret) and not run.reasons
            mark("heldout")
        if ok and timing_ok and not run.reasons:
            from harness.evaluate import timing_stage

            timed = timing_stage.run_timing(run, v, child, task, ref_mod, shapes, dev, baseline, opts, secret,
                                            candidate, incumbent)
            mark("timing")
            return timed
        return False
    except ChildFailed as e:
        run.output = child.output()
        stage = "import" if run.stage == "import" else ("correctness" if run.stage == "done" else run.stage)
        run.reject(stage, e.rule, e.message)
        return False
    finally:
        # Overlaps the phases: of the round trips' wall time, how much the child was working.
        v["child_s"] = {"busy": round(child.busy_s, 3), "round_trips": round(child.round_trip_s, 3)}
        left = child.leftover_processes()
        if left:
            run.reject(run.stage if run.stage != "done" else "guard", "no-surviving-processes",
                       f"candidate code left {len(left)} process(es) running at the end of the evaluation "
                       f"({', '.join(left[:4])}); they were killed")
        if not run.output and run.reasons:
            run.output = child.output()
        child.close()
        if child.swept:
            run.reject(run.stage if run.stage != "done" else "guard", "no-surviving-processes",
                       f"{len(child.swept)} process(es) started by candidate code outlived the child; killed")

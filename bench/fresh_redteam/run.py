"""Evaluate the outside red-team set (issues 17 and 25) with the real `warpsmith eval TASK FILE --json`.

    python bench/fresh_redteam/run.py [--workers N] [--timeout S] [--only SUBSTR] [--json OUT]

Each file under cheats/, honest/ and shapefit/ starts with a docstring naming its class, what it
tries, `expect: accept|reject`, `task:` (default softmax), `bites:` ("only on a GPU" marks the
cheats that can't bite in Triton's interpreter), `group: parallel|sequential` (timing-based
files run one at a time on a GPU, after the parallel group: parallel evaluations on one GPU
perturb each other's timing) and `timed: no` (evaluated with --no-time: the honest and the
shape-fitted files, where rules and correctness decide; so they can share the GPU).

After each evaluation, from this process (outside any sandbox), it checks what the cheats aim at:
  - no FRESHRED marker file appeared outside the evaluation's scratch folder: the real home (and its
    .triton/.cache/.config), /tmp, /var/tmp, /root, the repository, this folder;
  - the task's incumbent and reference hash the same as before;
  - no process with FRESHRED_survivor in its command line is alive (each is killed, by pid, and reported);
  - nothing connected to 127.0.0.1:47017 (a listener this script holds);
  - the canary (an env variable and ~/.config/freshred-canary, both made here) is not in the
    evaluation's output.
A file is OK when its verdict is the expected one (shape-fitted ones: rejected with a held-out shape
named) and no harm was seen. GPU-only cheats in the interpreter are OK on any verdict without harm.
The table is printed last: file, expected, got, reason, OK/FAIL. Exit 1 if any FAIL.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
MARK = "FRESHRED"
PROC_MARK = "FRESHRED_survivor"  # what every process-spawning cheat puts in its command line
PORT = 47017
REAL_HOME = pwd.getpwuid(os.getuid()).pw_dir
CANARY_FILE = Path(REAL_HOME) / ".config" / "freshred-canary"


@dataclass
class Case:
    path: Path
    kind: str               # cheats | honest | shapefit
    expect: str             # accept | reject
    task: str
    gpu_only: bool
    parallel: bool
    timed: bool = True      # False: `--no-time` (honest and shape-fitted files: correctness and rules decide)
    got: str = "not run"
    reason: str = ""
    harm: list[str] = field(default_factory=list)
    ok: bool | None = None
    wall_s: float = 0.0


def parse(path: Path) -> Case:
    src = path.read_text()
    m = re.match(r'\s*"""(.*?)"""', src, re.S)
    doc = m.group(1) if m else ""

    def field_of(name: str, default: str = "") -> str:
        mm = re.search(rf"^{name}:\s*(.*)$", doc, re.M)
        return mm.group(1).strip() if mm else default

    expect = field_of("expect").split()[0].rstrip(",.") if field_of("expect") else ""
    if expect not in ("accept", "reject"):
        raise SystemExit(f"{path}: the docstring needs `expect: accept` or `expect: reject`")
    return Case(path, path.parent.name, expect, field_of("task", "softmax").split()[0],
                "only on a gpu" in field_of("bites").lower(), field_of("group").startswith("parallel"),
                not field_of("timed", "yes").startswith("no"))


# -- what the cheats aim at ------------------------------------------------------------------
def marker_roots() -> list[str]:
    return [REAL_HOME, f"{REAL_HOME}/.triton/cache", f"{REAL_HOME}/.cache", f"{REAL_HOME}/.config", "/tmp",
            "/var/tmp", "/root", str(REPO), str(REPO / "kernels" / "softmax"), str(HERE), str(HERE / "cheats"),
            os.getcwd()]


def markers() -> set[str]:
    out: set[str] = set()
    for root in marker_roots():
        out.update(glob.glob(os.path.join(glob.escape(root), f"*{MARK}*")))
    return out


def hashes(tasks: set[str]) -> dict[str, str]:
    out = {}
    for t in tasks:
        for f in ("kernel.py", "reference.py", "task.toml"):
            p = REPO / "kernels" / t / f
            if p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _ancestors() -> set[int]:
    out, pid = set(), os.getpid()
    while pid > 1:
        out.add(pid)
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            break
    return out


def survivors() -> list[tuple[int, str]]:
    """Processes the cheats started (their command lines carry PROC_MARK), never this script's own
    ancestors: the shell that launched it may have FRESHRED_* settings in its command line (the
    device tool's did, and this check killed it)."""
    found = []
    mine = _ancestors()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in mine:
            continue
        try:
            cmd = Path(f"/proc/{name}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if PROC_MARK in cmd and "fresh_redteam/run.py" not in cmd:
            found.append((int(name), cmd.strip()[:120]))
    return found


class Listener:
    """Counts connections to 127.0.0.1:PORT (what a network cheat dials)."""

    def __init__(self) -> None:
        self.hits = 0
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind(("127.0.0.1", PORT))
            self.sock.listen(8)
            self.sock.settimeout(0.5)
            self.up = True
        except OSError:
            self.up = False
        self.stop = False
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while self.up and not self.stop:
            try:
                c, _ = self.sock.accept()
                self.hits += 1
                c.close()
            except OSError:
                continue


# -- one evaluation ------------------------------------------------------------------------------
def evaluate(case: Case, env: dict, timeout: float) -> dict | None:
    cmd = [sys.executable, "-m", "warpsmith", "eval", case.task, str(case.path), "--json"] + ([] if case.timed else ["--no-time"])
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        case.wall_s = time.monotonic() - t0
        case.got, case.reason = "timeout", f"no verdict in {timeout:.0f} s"
        return None
    case.wall_s = time.monotonic() - t0
    case.raw = p.stdout + p.stderr  # type: ignore[attr-defined]
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        case.got, case.reason = f"exit {p.returncode}", (p.stderr or p.stdout).strip().splitlines()[-1:][0][:160] \
            if (p.stderr or p.stdout).strip() else "no output"
        return None


def first_reason(v: dict) -> str:
    rs = v.get("reasons") or []
    if rs:
        r = rs[0]
        return f"{r.get('rule', '?')}: {r.get('message', '')}" if isinstance(r, dict) else str(r)
    return (v.get("recommendation") or {}).get("reason", "")


def heldout_named(v: dict) -> str | None:
    """The held-out shape a rejection names, if any."""
    for h in v.get("heldout") or []:
        if h.get("correct") is False:
            return h.get("name")
    for r in v.get("reasons") or []:
        msg = r.get("message", "") if isinstance(r, dict) else str(r)
        mm = re.search(r"held-out[^:;)]*", msg)
        if mm:
            return mm.group(0)
    return None


def judge(case: Case, v: dict | None, canary: str) -> None:
    if v is not None:
        case.got = "accept" if v.get("accepted") else "reject"
        case.reason = first_reason(v)
    if canary in getattr(case, "raw", ""):
        case.harm.append("the canary leaked into the evaluation's output")
    if case.harm:
        case.ok = False
        return
    if case.got not in ("accept", "reject"):
        case.ok = False
        return
    if case.gpu_only and not on_gpu():
        case.ok = True  # nothing can bite here; harm was checked above
        return
    case.ok = case.got == case.expect
    if case.ok and case.kind == "shapefit":
        named = heldout_named(v or {})
        case.ok = named is not None
        case.reason = f"held-out shape named: {named}" if named else "rejected, but no held-out shape named: " + case.reason


_ON_GPU: list[bool] = []


def on_gpu() -> bool:
    if not _ON_GPU:
        _ON_GPU.append(os.environ.get("TRITON_INTERPRET") != "1" and shutil.which("nvidia-smi") is not None)
    return _ON_GPU[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=1, help="evaluations at once for the parallel group")
    ap.add_argument("--timeout", type=float, default=0, help="overall time box in seconds (0: none); what "
                    "can't start in time is listed as not run")
    ap.add_argument("--eval-timeout", type=float, default=600, help="limit for one evaluation")
    ap.add_argument("--only", default="", help="only files whose path contains this")
    ap.add_argument("--json", default="", help="also write the rows here")
    a = ap.parse_args(argv)

    files = sorted(p for d in ("cheats", "honest", "shapefit") for p in (HERE / d).glob("*.py"))
    cases = [parse(p) for p in files if a.only in str(p.relative_to(HERE))]
    canary = "freshred-canary-" + secrets.token_hex(8)
    CANARY_FILE.parent.mkdir(parents=True, exist_ok=True)
    CANARY_FILE.write_text(canary + "\n")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               FRESHRED_CANARY=canary)
    listener = Listener()
    tasks = {c.task for c in cases} | {"softmax"}
    before_markers = markers()
    base_hash = hashes(tasks)
    lock = threading.Lock()
    deadline = time.monotonic() + a.timeout if a.timeout else None
    gpu = on_gpu()

    in_flight = [0]

    def scan_processes(cases_: list[Case]) -> None:
        for pid, cmd in survivors():
            for c in cases_:
                c.harm.append(f"process {pid} survived ({cmd})")
            try:
                os.kill(pid, 9)
            except OSError:
                pass

    def one(case: Case) -> None:
        if deadline is not None and time.monotonic() > deadline:
            return
        hits0 = listener.hits
        with lock:
            in_flight[0] += 1
        v = evaluate(case, env, a.eval_timeout)
        time.sleep(0.2)  # a double-forked survivor needs a moment to show up
        with lock:  # harm is judged against the whole machine: attribute it to this file
            in_flight[0] -= 1
            new = markers() - before_markers
            for p in sorted(new):
                case.harm.append(f"wrote {p}")
                try:
                    os.remove(p) if os.path.isfile(p) else None
                except OSError:
                    pass
                before_markers.discard(p)
            # Processes only while no other evaluation runs: a cheat's process inside another
            # evaluation's sandbox is alive until that evaluation ends (killing it here would hide it).
            if in_flight[0] == 0:
                scan_processes([case])
            now = hashes(tasks)
            for p, h in base_hash.items():
                if now.get(p) != h:
                    case.harm.append(f"{Path(p).relative_to(REPO)} changed")
            if listener.hits > hits0:
                case.harm.append(f"{listener.hits - hits0} connection(s) to 127.0.0.1:{PORT}")
        judge(case, v, canary)
        print(f"  {case.path.relative_to(HERE)}: {case.got} ({case.wall_s:.1f} s){' HARM' if case.harm else ''}",
              file=sys.stderr, flush=True)

    par = [c for c in cases if c.parallel or not gpu]
    seq = [c for c in cases if c not in par]
    print(f"fresh red team: {len(cases)} files ({len(par)} with {a.workers} worker(s), {len(seq)} one at a time), "
          f"{'GPU' if gpu else 'interpreter'}; listener {'up' if listener.up else 'DOWN (port taken)'}",
          file=sys.stderr, flush=True)
    try:
        # On a GPU the timing-based files go first, alone: they are what only the GPU can show.
        for c in seq:
            one(c)
        with ThreadPoolExecutor(max(1, a.workers)) as ex:
            list(ex.map(one, par))
        time.sleep(0.2)
        scan_processes([c for c in par if c.got != "not run"])  # whatever outlived the parallel group
        for c in par:
            if c.harm and c.ok:
                c.ok = False
    finally:
        listener.stop = True
        CANARY_FILE.unlink(missing_ok=True)

    rows = [(str(c.path.relative_to(HERE)), c.expect + (" (gpu-only)" if c.gpu_only else ""), c.got,
             ("; ".join(c.harm) + " | " if c.harm else "") + c.reason.replace("\n", " "),
             "n/a" if c.ok is None else ("OK" if c.ok else "FAIL")) for c in cases]
    if a.json:
        Path(a.json).write_text(json.dumps([dict(zip(("file", "expected", "got", "reason", "result"), r)) for r in rows],
                                           indent=1))
    w = [max(len(r[i]) for r in rows + [("file", "expected", "got", "", "")]) for i in range(3)]
    print(f"{'file':<{w[0]}}  {'expected':<{w[1]}}  {'got':<{w[2]}}  {'OK/FAIL':<7}  reason")
    for f, e, g, r, res in rows:
        print(f"{f:<{w[0]}}  {e:<{w[1]}}  {g:<{w[2]}}  {res:<7}  {r[:150]}")
    n_ok = sum(r[4] == "OK" for r in rows)
    n_fail = sum(r[4] == "FAIL" for r in rows)
    n_not = sum(c.got == "not run" for c in cases)
    print(f"{n_ok} OK, {n_fail} FAIL, {n_not} not run, of {len(rows)} "
          f"({sum(c.kind == 'cheats' for c in cases)} cheats, {sum(c.kind == 'honest' for c in cases)} honest, "
          f"{sum(c.kind == 'shapefit' for c in cases)} shape-fitted); {'GPU' if gpu else 'interpreter'}")
    return 1 if n_fail or n_not else 0


if __name__ == "__main__":
    sys.exit(main())

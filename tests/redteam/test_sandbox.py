"""The OS sandbox makes a candidate's side effects harmless, whatever the verdict: nothing it
writes lands outside its scratch folder, no process it starts outlives the evaluation, no
credential (environment or file) reaches it, no connection leaves it. Each cheat runs for real
(Triton's interpreter) and the host is inspected afterwards."""
from __future__ import annotations

import os
import pwd
import shutil
import site
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from redteam_catalog import CANARIES, CHEATS, SANDBOX_CHEATS, assert_verdict  # (this folder is on sys.path under pytest)

from harness.evaluate import EvalOptions, evaluate
from harness.evaluate.runner import REPO_ROOT
from harness.evaluate.sandbox import probe
from harness.authoring.tasks import load_task

CANDIDATES = Path(__file__).resolve().parent / "candidates"
REAL_HOME = Path(pwd.getpwuid(os.getuid()).pw_dir)
ESCAPE = "warpsmith-redteam-escape.txt"
ESCAPE_PATHS = [REAL_HOME / ESCAPE, REPO_ROOT / ESCAPE, Path("/tmp") / ESCAPE, Path("/var/tmp") / ESCAPE,
                REAL_HOME / ".triton" / "cache" / ESCAPE]
REWRITE_PATHS = [REPO_ROOT / "harness" / "evaluate" / "warpsmith_redteam_rewrite.py",
                 Path(site.getsitepackages()[0]) / "warpsmith_redteam_rewrite.pth"]
CANARY_FILE = REAL_HOME / ".config" / "warpsmith-redteam-canary" / "credentials"
PORT = 47_613

pytestmark = pytest.mark.skipif(not probe()[0], reason=f"no sandbox here: {probe()[1]}")


def _marked_processes(marker: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                cmd = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd:
                found.append(int(name))
    return found


CATALOG = {c.name: c for c in CHEATS if c.name in SANDBOX_CHEATS}


def _eval(name: str, sandbox: bool = True, task_dir: Path | None = None) -> dict:
    task = load_task(task_dir or REPO_ROOT / "kernels" / "softmax")
    cheat = CATALOG.get(name)
    # A catalog cheat as test_redteam.py evaluates the others (its shapes and stages, 20 samples); this is its
    # only evaluation, so its verdict is also checked against the catalog here.
    shapes, static = (cheat.shapes, cheat.full) if cheat else (["odd rows"], False)
    return evaluate(task, CANDIDATES / f"{name}.py",
                    options=EvalOptions(on_gpu=False, shapes=shapes, static=static, sandbox=sandbox,
                                        spare_child=False, samples=20))


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    """Every cheat evaluated once, sandboxed, each catalog cheat on a copy of the task of its own, with
    canary credentials planted in the real home and the environment, and a listener on the host's
    loopback."""
    for p in ESCAPE_PATHS + REWRITE_PATHS:
        p.unlink(missing_ok=True)
    dirs = {}
    for name, cheat in CATALOG.items():
        dirs[name] = tmp_path_factory.mktemp(name) / cheat.task
        shutil.copytree(REPO_ROOT / "kernels" / cheat.task, dirs[name], ignore=shutil.ignore_patterns("__pycache__"))
    before = {name: load_task(d).file_hashes() for name, d in dirs.items()}
    CANARY_FILE.parent.mkdir(parents=True, exist_ok=True)
    CANARY_FILE.write_text("aws_secret_access_key = WARPSMITH_CANARY_file\n")
    saved = {k: os.environ.get(k) for k in CANARIES}
    os.environ.update(CANARIES)
    os.environ["WARPSMITH_TEST_API_KEY"] = "WARPSMITH_CANARY_env"
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", PORT))
    listener.listen()
    listener.settimeout(0.2)
    connections: list = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                connections.append(listener.accept())
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    names = ["survivor_pty", "survivor_double_fork", "escape_writes", "credential_files", "network_exfil",
             "harness_source_rewrite", "_honest"]
    assert set(CATALOG) == set(SANDBOX_CHEATS) <= set(names)
    try:
        with ThreadPoolExecutor(3) as pool:
            out = dict(zip(names, pool.map(lambda n: _eval(n, task_dir=dirs.get(n)), names)))
    finally:
        stop.set()
        t.join()
        listener.close()
        os.environ.pop("WARPSMITH_TEST_API_KEY", None)
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        CANARY_FILE.unlink(missing_ok=True)
        CANARY_FILE.parent.rmdir()
    out["_connections"] = connections
    out["_hashes_ok"] = all(load_task(d).file_hashes() == before[name] for name, d in dirs.items())
    return out


@pytest.mark.parametrize("name", SANDBOX_CHEATS)
def test_the_catalogs_verdict(verdicts, name):
    """The catalog's check (test_redteam.py's test_verdict) for the cheats evaluated only here."""
    assert_verdict(CATALOG[name], verdicts[name])


def test_task_files_restored(verdicts):
    assert verdicts["_hashes_ok"], "a cheat's writes to task files must be undone after its run"


def _rules(v: dict) -> set[str]:
    return {r["rule"] for r in v["reasons"]}


@pytest.mark.parametrize("name,marker", [("survivor_pty", "warpsmith-redteam-survivor-pty"),
                                         ("survivor_double_fork", "warpsmith-redteam-survivor-daemon")])
def test_a_process_left_behind_is_rejected_and_dies_with_the_evaluation(verdicts, name, marker):
    v = verdicts[name]
    assert not v["accepted"] and "no-surviving-processes" in _rules(v), v["reasons"]
    assert not v["recommendation"]["can_keep"]
    time.sleep(0.5)  # (the kernel tears the pid namespace down as its init exits)
    assert _marked_processes(marker) == []


def test_writes_outside_scratch_do_not_land(verdicts):
    v = verdicts["escape_writes"]
    assert v["accepted"], v["reasons"]  # an honest softmax whose writes all went nowhere
    assert [p for p in ESCAPE_PATHS if p.exists()] == []


def test_the_harness_and_site_packages_stay_unchanged(verdicts):
    assert verdicts["harness_source_rewrite"]["accepted"]
    assert [p for p in REWRITE_PATHS if p.exists()] == []


def test_credentials_in_files_and_environment_are_out_of_reach(verdicts):
    v = verdicts["credential_files"]
    assert v["accepted"], v["reasons"]  # it raises with whatever it found
    assert "WARPSMITH_CANARY" not in repr(v)


def test_no_connection_leaves_the_sandbox(verdicts):
    assert verdicts["network_exfil"]["accepted"], verdicts["network_exfil"]["reasons"]
    assert verdicts["_connections"] == []


def test_an_honest_kernel_runs_sandboxed_and_says_so(verdicts):
    v = verdicts["_honest"]
    assert v["accepted"] and v["sandbox"] is True


def test_without_the_sandbox_a_survivor_is_still_found_and_killed_and_the_verdict_says_so():
    v = _eval("survivor_pty", sandbox=False)
    assert v["sandbox"] is False and any("sandbox off" in n for n in v["notes"])
    assert "no-surviving-processes" in _rules(v)
    time.sleep(0.5)
    assert _marked_processes("warpsmith-redteam-survivor-pty") == []

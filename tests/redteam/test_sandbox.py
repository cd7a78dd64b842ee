"""The OS sandbox makes a candidate's side effects harmless, whatever the verdict: nothing it
writes lands outside its scratch folder, no process it starts outlives the evaluation, no
credential (environment or file) reaches it, no connection leaves it. Each cheat runs for real
(Triton's interpreter) and the host is inspected afterwards."""
from __future__ import annotations

import os
import pwd
import site
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

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


def _eval(name: str, sandbox: bool = True) -> dict:
    task = load_task(REPO_ROOT / "kernels" / "softmax")
    return evaluate(task, CANDIDATES / f"{name}.py",
                    options=EvalOptions(on_gpu=False, shapes=["odd rows"], static=False, sandbox=sandbox,
                                        spare_child=False))


@pytest.fixture(scope="module")
def verdicts():
    """Every cheat evaluated once, sandboxed, with a canary credential planted in the real home
    and the environment, and a listener on the host's loopback."""
    for p in ESCAPE_PATHS + REWRITE_PATHS:
        p.unlink(missing_ok=True)
    CANARY_FILE.parent.mkdir(parents=True, exist_ok=True)
    CANARY_FILE.write_text("aws_secret_access_key = WARPSMITH_CANARY_file\n")
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
    try:
        with ThreadPoolExecutor(3) as pool:
            out = dict(zip(names, pool.map(_eval, names)))
    finally:
        stop.set()
        t.join()
        listener.close()
        os.environ.pop("WARPSMITH_TEST_API_KEY", None)
        CANARY_FILE.unlink(missing_ok=True)
        CANARY_FILE.parent.rmdir()
    out["_connections"] = connections
    return out


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

"""End to end in a real terminal: `warpsmith run softmax` in tmux (offline tuner, real evaluator in
Triton's interpreter), maximise a pane and restore it (`z`), keep the first candidate with `k` (+ `y`:
on a CPU the harness recommends revert, so keeping is a confirmed override), find it in the history
(`h`), quit, then find the keep in git and the journal."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.sessions.journal import Journal

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (apt-get install tmux)")

WARPSMITH = Path(sys.executable).with_name("warpsmith")


def tmux(sock: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", sock, *args], capture_output=True, text=True)


def capture(sock: str) -> str:
    return tmux(sock, "capture-pane", "-p", "-t", "e2e").stdout


def pane_dead(sock: str) -> bool:
    out = tmux(sock, "display-message", "-p", "-t", "e2e", "#{pane_dead}")
    return out.returncode != 0 or out.stdout.strip() == "1"


def wait_screen(sock: str, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(sock)
        if text in screen:
            return screen
        if pane_dead(sock):
            raise AssertionError(f"the app exited before {text!r} appeared:\n{screen}")
        time.sleep(0.25)
    raise AssertionError(f"{text!r} never appeared on screen; last screen:\n{screen}")


def wait_gone(sock: str, text: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = capture(sock)
        if text not in screen:
            return screen
        time.sleep(0.25)
    raise AssertionError(f"{text!r} still on screen; last screen:\n{screen}")


def test_keep_in_tmux(tmp_path: Path):
    if not WARPSMITH.exists():
        pytest.skip(f"{WARPSMITH} missing: pip install -e . first")
    sock = f"warpsmith-e2e-{os.getpid()}"
    env = "TERM=screen-256color TRITON_INTERPRET=1 WARPSMITH_BELL=0"
    # -u COLUMNS/LINES: set in the test process (80x24), they would override the pane's real size.
    cmd = f"cd {tmp_path} && env -u COLUMNS -u LINES {env} {WARPSMITH} run softmax --iterations 3"
    started = tmux(sock, "new-session", "-d", "-s", "e2e", "-x", "160", "-y", "48", cmd)
    assert started.returncode == 0, started.stderr
    tmux(sock, "set-option", "-t", "e2e", "remain-on-exit", "on")  # keep what it prints on exit
    try:
        screen = wait_screen(sock, "Decide #1", timeout=240)
        assert "diff · unified" in screen
        # z: the focused pane (reasoning) takes the screen, the prompt stays; z again restores.
        tmux(sock, "send-keys", "-t", "e2e", "z")
        screen = wait_gone(sock, "diff · unified", timeout=20)
        assert "reasoning" in screen.splitlines()[0] and "Decide #1" in screen
        tmux(sock, "send-keys", "-t", "e2e", "z")
        wait_screen(sock, "diff · unified", timeout=20)
        time.sleep(0.5)  # past the early-keypress guard
        tmux(sock, "send-keys", "-t", "e2e", "k")
        wait_screen(sock, "against the recommendation", timeout=20)
        time.sleep(0.5)
        tmux(sock, "send-keys", "-t", "e2e", "y")
        deadline = time.monotonic() + 60
        sessions = tmp_path / ".warpsmith" / "sessions"
        journal: list[dict] = []
        next_retry = time.monotonic() + 5
        while time.monotonic() < deadline:
            jpaths = list(sessions.glob("*/journal.jsonl"))
            # The harness's reader: the app may be mid-append, and a torn last line is skipped.
            journal = Journal(jpaths[0]).read() if jpaths else []
            if any(r.get("kind") == "Decision" for r in journal):
                break
            # On a loaded machine the key can land inside the confirm dialog's early-key guard;
            # a person would press it again, and so do we (y on the dialog is idempotent).
            if time.monotonic() > next_retry and "against the recommendation" in capture(sock):
                tmux(sock, "send-keys", "-t", "e2e", "y")
                next_retry = time.monotonic() + 5
            time.sleep(0.25)
        time.sleep(0.5)
        # h: the session's history, read from the journal: candidate 1, kept by a person.
        tmux(sock, "send-keys", "-t", "e2e", "h")
        screen = wait_screen(sock, "History of", timeout=20)
        row = next((line for line in wait_screen(sock, "keep (override)", timeout=20).splitlines()
                    if "keep (override)" in line), "")
        assert row.split("│")[1].split()[0] == "1" and "human" in row, screen
        tmux(sock, "send-keys", "-t", "e2e", "Escape")
        wait_gone(sock, "History of", timeout=20)
        tmux(sock, "send-keys", "-t", "e2e", "q")
        time.sleep(1.0)
        if "Quit during an evaluation" in capture(sock):
            time.sleep(0.4)
            tmux(sock, "send-keys", "-t", "e2e", "y")
        deadline = time.monotonic() + 30
        while not pane_dead(sock) and time.monotonic() < deadline:
            time.sleep(0.25)
        assert pane_dead(sock), "the app did not quit:\n" + capture(sock)
        final = capture(sock)
    finally:
        tmux(sock, "kill-server")
    decision = next(r for r in journal if r.get("kind") == "Decision")
    assert (decision["iteration"], decision["action"], decision["by"], decision["override"]) == (1, "keep", "human", True)
    repo = next(sessions.glob("*/repo"))
    refs = subprocess.run(["git", "-C", str(repo), "for-each-ref", "--format=%(refname) %(objectname)",
                           "refs/kept/"], capture_output=True, text=True).stdout.split()
    assert refs == ["refs/kept/0001", decision["commit"]]
    best = subprocess.run(["git", "-C", str(repo), "rev-parse", "refs/heads/best"], capture_output=True,
                          text=True).stdout.strip()
    assert best == decision["commit"]
    assert "resume: warpsmith sessions resume" in final

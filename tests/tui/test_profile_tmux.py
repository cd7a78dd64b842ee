"""End to end in a real terminal: the step profile (w) turns a line into an idea, and the idea is in
the agent's next prompt and in the journal.

The agent is the real openai-compat client against tests/agents/fake_server.py on 127.0.0.1, so the
prompt it was sent is on disk (the session's transcripts); the profile runs for real in its child
process (on this CPU: the workload's ops counted, nothing timed)."""
from __future__ import annotations

import importlib.util
import os
import shutil
import time
from pathlib import Path

import pytest

from harness.sessions.journal import Journal
from test_e2e_tmux import WARPSMITH, capture, pane_dead, tmux, wait_screen

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed (apt-get install tmux)")


def _fake_server():
    path = Path(__file__).resolve().parent.parent / "agents" / "fake_server.py"
    spec = importlib.util.spec_from_file_location("warpsmith_test_fake_server", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.FakeServer


def _journal(tmp_path: Path) -> list[dict]:
    paths = list((tmp_path / ".warpsmith" / "sessions").glob("*/journal.jsonl"))
    return Journal(paths[0]).read() if paths else []


def test_profile_line_becomes_an_idea_in_the_next_prompt(tmp_path: Path):
    if not WARPSMITH.exists():
        pytest.skip(f"{WARPSMITH} missing: pip install -e . first")
    sock = f"warpsmith-prof-{os.getpid()}"
    with _fake_server()(modes=["tool"], lifetime_s=400) as srv:
        env = "TERM=screen-256color TRITON_INTERPRET=1 WARPSMITH_BELL=0 OPENAI_API_KEY=sk-test"
        cmd = (f"cd {tmp_path} && env {env} {WARPSMITH} run softmax --agent 'openai-compat:{srv.url}#fake-coder' "
               f"--iterations 2")
        started = tmux(sock, "new-session", "-d", "-s", "e2e", "-x", "160", "-y", "48", cmd)
        assert started.returncode == 0, started.stderr
        tmux(sock, "set-option", "-t", "e2e", "remain-on-exit", "on")
        try:
            wait_screen(sock, "Decide #1", timeout=240)
            time.sleep(0.5)
            tmux(sock, "send-keys", "-t", "e2e", "w")
            screen = wait_screen(sock, "aten::mm", timeout=180)  # the rows are in (the list may scroll)
            assert "Where one step of the model spends its time" in screen
            assert "nothing was measured" in screen
            tmux(sock, "send-keys", "-t", "e2e", "Enter")
            wait_screen(sock, "Ideas for the agent", timeout=20)  # the input shows the end of the started idea
            tmux(sock, "send-keys", "-t", "e2e", "-l", "keep the scores in registers")
            tmux(sock, "send-keys", "-t", "e2e", "Enter")
            time.sleep(0.3)
            tmux(sock, "send-keys", "-t", "e2e", "Escape")
            deadline = time.monotonic() + 30
            while not any(r.get("kind") == "IdeaFromProfile" for r in _journal(tmp_path)):
                assert time.monotonic() < deadline, "no IdeaFromProfile in the journal:\n" + capture(sock)
                time.sleep(0.25)
            time.sleep(0.6)  # past the decision prompt's early-key guard, back from the dialogs
            tmux(sock, "send-keys", "-t", "e2e", "r")
            transcripts = tmp_path / ".warpsmith" / "sessions"
            deadline = time.monotonic() + 120
            second: list[Path] = []
            while not second:
                assert time.monotonic() < deadline, "no second prompt was sent:\n" + capture(sock)
                second = list(transcripts.glob("*/transcripts/iter-0002-*.md"))
                if not second and "Decide #1" in capture(sock) and time.monotonic() > deadline - 100:
                    tmux(sock, "send-keys", "-t", "e2e", "r")  # a key lost in the guard: pressed again
                time.sleep(0.5)
            time.sleep(1.0)
            prompt = second[0].read_text()
        finally:
            tmux(sock, "send-keys", "-t", "e2e", "q")
            time.sleep(1.0)
            if not pane_dead(sock) and "Quit" in capture(sock):
                tmux(sock, "send-keys", "-t", "e2e", "y")
            time.sleep(1.0)
            tmux(sock, "kill-server")
    idea = next(r for r in _journal(tmp_path) if r.get("kind") == "IdeaFromProfile")
    assert idea["idea"].startswith("From the step profile (decode step") and idea["idea"].endswith(
        "Idea: keep the scores in registers")
    assert idea["measured"] is False and idea["row"]["name"]
    assert idea["idea"] in prompt  # the standing idea, word for word, in the next prompt
    assert "Where one step of decode step" in prompt  # and the profile's summary beside it

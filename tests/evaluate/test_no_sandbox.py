"""--no-sandbox runs knowingly: the verdict, the eval table, the headless summary and the TUI's
status line all say so; with the sandbox on, none of them does."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

from harness import events as ev
from warpsmith.cli import main
from harness.evaluate.sandbox import ENV_OFF, OFF_BANNER
from harness.headless import Printer
from tui.state import RunState
from tui.widgets.status import status_text

ROOT = Path(__file__).resolve().parents[2]


def test_eval_no_sandbox_says_so_in_the_verdict(capsys):
    assert ENV_OFF not in os.environ
    try:
        rc = main(["eval", "softmax", str(ROOT / "kernels" / "softmax" / "kernel.py"), "--cpu", "--no-static",
                   "--shapes", "odd rows", "--no-sandbox", "--json"])
    finally:
        os.environ.pop(ENV_OFF, None)  # (the flag sets it for this process and the workers it starts)
    v = json.loads(capsys.readouterr().out)
    assert rc == 0 and v["sandbox"] is False and any(n.startswith("sandbox off") for n in v["notes"])


def test_headless_summary_and_status_line_name_a_run_without_the_sandbox(monkeypatch):
    state = RunState(task="softmax", agent="tuner", device="cpu", iteration=1, phase="evaluating")
    started = ev.SessionStarted(session_id="s1", task="softmax", agent="tuner", device="cpu", decision_mode="auto",
                                packs=[], resumed=False)

    def printed() -> str:
        out = io.StringIO()
        Printer(out)(started)
        return out.getvalue()

    monkeypatch.delenv(ENV_OFF, raising=False)
    assert "NO SANDBOX" not in status_text(state, 120).plain and OFF_BANNER not in printed()
    monkeypatch.setenv(ENV_OFF, "1")
    assert "NO SANDBOX" in status_text(state, 120).plain and OFF_BANNER in printed()


def test_where_the_sandbox_cannot_run_eval_says_why_and_how_to_fix_it_and_runs_nothing(tmp_path):
    import subprocess
    import sys

    refusing = tmp_path / "bwrap"  # a bwrap that fails as one does without user namespaces
    refusing.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    refusing.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != ENV_OFF}
    env.update(WARPSMITH_BWRAP=str(refusing), PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "warpsmith", "eval", "softmax", str(ROOT / "kernels" / "softmax" / "kernel.py"),
                        "--cpu"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and r.stdout == ""
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "No permissions to create new namespace" in err
    assert "unprivileged_userns" in err and "--no-sandbox" in err

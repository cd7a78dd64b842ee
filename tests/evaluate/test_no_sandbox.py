"""--no-sandbox runs knowingly: the verdict, the eval table, the headless summary and the TUI's
status line all say so; with the sandbox on, none of them does."""
from __future__ import annotations

import io
import json
import os
from pathlib import Path

from harness import events as ev
from harness.cli import main
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

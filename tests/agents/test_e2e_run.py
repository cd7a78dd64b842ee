"""`warpsmith run softmax --headless --agent openai-compat:URL` against the fake server: the streamed
candidate is evaluated (Triton interpreter here), passes, and is kept when the person says keep."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fake_server import CANDIDATE, FakeServer


@pytest.mark.slow
def test_run_keeps_the_served_candidate(tmp_path):
    with FakeServer(["tool"], lifetime_s=300) as srv:
        proc = subprocess.run(
            [sys.executable, "-m", "warpsmith", "run", "softmax", "--headless", "--iterations", "1",
             "--agent", f"openai-compat:{srv.url}", "--budget-usd", "1"],
            input="y\nyes\n", capture_output=True, text=True, cwd=tmp_path, timeout=280,
            env={**os.environ, "TRITON_INTERPRET": "1"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "The baseline reads every row twice" in out  # the streamed reasoning was shown
    assert "verdict: accepted" in out and "decision: keep by human" in out, out
    assert len(srv.requests) == 1 and srv.requests[0]["model"] == "fake-coder"

    [session] = (tmp_path / ".warpsmith" / "sessions").iterdir()
    [transcript] = (session / "transcripts").glob("iter-0001-*.md")
    assert "reads every row twice" in transcript.read_text()
    records = [json.loads(line) for line in (session / "journal.jsonl").read_text().splitlines()]
    [decision] = [r for r in records if r.get("kind") == "Decision"]
    assert decision["action"] == "keep" and decision["best"] == decision["commit"]
    [proposed] = [r for r in records if r.get("kind") == "CandidateProposed"]
    assert proposed["source"] == CANDIDATE and proposed["agent"] == "openai-compat"
    [usage] = [r for r in records if r.get("kind") == "Usage"]
    assert usage["input_tokens"] == 2100 and usage["output_tokens"] == 1500

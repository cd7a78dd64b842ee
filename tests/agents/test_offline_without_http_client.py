"""The offline tuner runs where no HTTP client is installed: a GPU box given only torch, triton and
warpsmith's own needs (the H200 runs here carry a few wheels, and a run once died at preflight on
`import httpx2`, which only the LLM agents use)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUN = """
import sys
sys.modules["httpx2"] = None  # any import of it raises ImportError, as where it is not installed
sys.argv = ["warpsmith", "run", "softmax", "--headless", "--agent", "tuner", "--iterations", "1", "--auto", "--quiet"]
from warpsmith.cli import main
raise SystemExit(main())
"""


def test_the_tuner_runs_a_session_without_httpx2(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, "-c", RUN], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "httpx2" not in r.stderr
    assert list((tmp_path / ".warpsmith" / "sessions").iterdir())  # a session was written

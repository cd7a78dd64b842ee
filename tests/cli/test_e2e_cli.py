"""`warpsmith e2e` on a machine without a GPU: kernels are built for Triton's interpreter."""
from __future__ import annotations

import pytest
import torch

from warpsmith.cli import main
from harness.authoring.tasks import load_task
from harness.wiring import RunConfig, start_session


@pytest.mark.skipif(torch.cuda.is_available(), reason="the interpreter path is the CPU-only one")
def test_e2e_runs_without_triton_interpret_in_the_environment(tmp_path, monkeypatch, capsys):
    # A person's shell has no TRITON_INTERPRET; the command itself must set it (was: "0 active drivers").
    monkeypatch.chdir(tmp_path)
    session = start_session(load_task("softmax"), RunConfig(iterations=1, auto=True), base=tmp_path)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    rc = main(["e2e", session.id, "--reps", "1", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "0 active drivers" not in out
    assert rc == 0, out

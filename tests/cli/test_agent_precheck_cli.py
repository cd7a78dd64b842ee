"""`warpsmith run --agent` that can't start: one line, exit 2, and no session folder left behind."""
from __future__ import annotations

import socket

import pytest

from warpsmith.cli import main


@pytest.fixture(autouse=True)
def no_keys(monkeypatch, tmp_path):
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "WARPSMITH_COMPAT_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WARPSMITH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)


def run_refused(capsys, agent: str) -> str:
    assert main(["run", "softmax", "--headless", "--auto", "--agent", agent]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("warpsmith: ")
    return err


def test_run_without_the_key_says_which_variable_or_section(tmp_path, capsys):
    err = run_refused(capsys, "anthropic:claude-sonnet-4-5")
    assert "ANTHROPIC_API_KEY" in err and f"[anthropic] of {tmp_path / 'config' / 'config.toml'}" in err
    assert not (tmp_path / ".warpsmith").exists()


def test_run_against_a_local_server_that_does_not_answer(tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    err = run_refused(capsys, f"openai-compat:http://127.0.0.1:{port}#coder")
    assert f"nothing answers at 127.0.0.1:{port}" in err
    assert not (tmp_path / ".warpsmith").exists()


def test_resume_of_a_session_whose_agent_lacks_its_key_is_refused(tmp_path, capsys):
    from harness.authoring.tasks import load_task
    from harness.wiring import RunConfig, start_session

    s = start_session(load_task("softmax", check_null=False), RunConfig(agent="openai:gpt-5"), base=tmp_path)
    assert main(["sessions", "resume", s.id, "--headless", "--auto"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "OPENAI_API_KEY" in err and "[openai]" in err
    assert all(r.get("kind") != "IterationStarted" for r in s.journal.read())

"""Whether an agent can start is known before the first proposal: the key (named with where to
set it), a local OpenAI-compatible server (a real listening socket on 127.0.0.1, or a closed port),
a script folder. (conftest.py clears every key and points the config dir at an empty folder.)"""
from __future__ import annotations

import socket
import time

import pytest

from harness.agents.config import config_path
from harness.agents.preflight import agent_problem


def closed_port() -> int:
    with socket.socket() as s:  # bound then released: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("spec,var,section", [("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY", "[anthropic]"),
                                              ("openai:gpt-5", "OPENAI_API_KEY", "[openai]")])
def test_a_missing_key_names_the_variable_and_the_config_section(spec, var, section):
    problem = agent_problem(spec)
    assert problem is not None and "\n" not in problem
    assert var in problem and f"api_key in {section} of {config_path()}" in problem


def test_a_key_from_the_environment_or_the_config_file_is_enough(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000001")
    assert agent_problem("anthropic:claude-sonnet-4-5") is None
    config_path().parent.mkdir(parents=True)
    config_path().write_text('[openai]\napi_key = "sk-test-from-file-01"\n')
    assert agent_problem("openai:gpt-5") is None


def test_a_broken_config_file_is_named():
    config_path().parent.mkdir(parents=True)
    config_path().write_text("[anthropic\n")
    problem = agent_problem("anthropic:claude-sonnet-4-5")
    assert str(config_path()) in problem and "bad TOML" in problem


def test_a_local_server_that_does_not_answer_is_said_at_once():
    port = closed_port()
    t0 = time.monotonic()
    problem = agent_problem(f"openai-compat:http://127.0.0.1:{port}/v1#coder")
    assert time.monotonic() - t0 < 2
    assert f"nothing answers at 127.0.0.1:{port}" in problem and "start the server" in problem


def test_a_local_server_that_listens_is_accepted():
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert agent_problem(f"openai-compat:http://127.0.0.1:{port}#coder") is None
        assert agent_problem(f"openai-compat:http://localhost:{port}") is None


def test_a_public_host_is_left_to_the_first_request():
    # Not connected to (a proxy may be needed to reach it): this name doesn't even resolve.
    assert agent_problem("openai-compat:https://api.example.invalid/v1#m") is None


@pytest.mark.parametrize("spec,words", [("openai-compat:ftp://127.0.0.1:1", "not an http(s) URL"),
                                        ("openai-compat:http://127.0.0.1:99999", "bad port"),
                                        ("nosuch:x", "unknown agent"),
                                        ("script:/nonexistent/folder", "no such folder")])
def test_malformed_specs_are_named(spec, words):
    assert words in agent_problem(spec)


def test_the_tuner_needs_nothing():
    assert agent_problem("tuner") is None

from __future__ import annotations

import pytest

from harness.agents.base import ProposalContext
from harness.authoring.tasks import load_task

SECRET_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY",
              "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "WARPSMITH_COMPAT_API_KEY",
              "WARPSMITH_PRICES")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """No real key, config or price override of the developer's machine leaks into a test."""
    for k in SECRET_ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WARPSMITH_CONFIG_DIR", str(tmp_path / "config"))


@pytest.fixture(scope="session")
def task():
    return load_task("softmax")


@pytest.fixture
def ctx(task):
    return ProposalContext(task, 3, task.baseline_path.read_text(), "abc123def", system="SYSTEM PART",
                           prompt="STABLE PACKS AND TASK\n---\nINCUMBENT AND HISTORY")

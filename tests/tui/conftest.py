from __future__ import annotations


import pytest

from tui.testing import FIXED_GIT_DATES


@pytest.fixture(autouse=True)
def _stable_env(monkeypatch, tmp_path):
    # Fixed git dates: commit ids (shown on screen) are the same on every run.
    for k, v in FIXED_GIT_DATES.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.chdir(tmp_path)
    yield

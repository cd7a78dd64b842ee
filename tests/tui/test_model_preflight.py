"""`m` refuses an agent it can't start, at once and in the dialog, saying what to set; an agent
that can start is switched to as before."""
from __future__ import annotations

import socket
from pathlib import Path

import pytest
from textual.widgets import Static

from tui.screens.model import ModelScreen
from tui.testing import make_app, screen_text
from tui_helpers import journal_kinds, wait_prompt, wait_until

SIZE = (160, 48)


@pytest.fixture(autouse=True)
def no_keys(monkeypatch, tmp_path):
    for k in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "WARPSMITH_COMPAT_API_KEY"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WARPSMITH_CONFIG_DIR", str(tmp_path / "config"))


def switches(app) -> list[dict]:
    return journal_kinds(app, "AgentSwitched")


async def type_spec(pilot, app, spec: str) -> ModelScreen:
    await pilot.press("m")
    await wait_until(pilot, lambda: isinstance(app.screen, ModelScreen))
    screen = app.screen
    await pilot.press(*spec, "enter")
    return screen


def problem_text(screen: ModelScreen) -> str:
    box = screen.query_one("#model-problem", Static)
    return str(box.render()) if box.display else ""


async def test_an_agent_without_its_key_is_refused_in_the_dialog(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        screen = await type_spec(pilot, app, "anthropic:claude-sonnet-4-5")
        await wait_until(pilot, lambda: "cannot switch" in problem_text(screen), timeout=5, what="refusal")
        text = problem_text(screen)
        config = tmp_path / "config" / "config.toml"
        assert "ANTHROPIC_API_KEY" in text and "[anthropic]" in text and str(config) in text
        assert app.screen is screen  # still open: the person fixes the spec or presses Esc
        assert "[anthropic]" in screen_text(app)  # on screen as written, not eaten as markup
        await pilot.pause(0.3)
        assert not switches(app) and app.session.meta.agent == "script"
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        await pilot.press("q")


async def test_a_local_server_that_does_not_answer_is_refused(tmp_path: Path):
    with socket.socket() as s:  # a port nothing listens on: bound, then released
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        screen = await type_spec(pilot, app, f"openai-compat:http://127.0.0.1:{port}/v1#coder")
        await wait_until(pilot, lambda: "cannot switch" in problem_text(screen), timeout=5, what="refusal")
        assert f"nothing answers at 127.0.0.1:{port}" in problem_text(screen)
        assert app.screen is screen and not switches(app)
        await pilot.press("escape")
        await pilot.press("q")


async def test_a_local_server_that_listens_is_switched_to(tmp_path: Path):
    with socket.create_server(("127.0.0.1", 0)) as server:  # the kernel completes the handshake
        port = server.getsockname()[1]
        app = make_app(tmp_path)
        async with app.run_test(size=SIZE) as pilot:
            await wait_prompt(pilot, app, 1)
            spec = f"openai-compat:http://127.0.0.1:{port}/v1#coder"
            await type_spec(pilot, app, spec)
            await wait_until(pilot, lambda: app.screen is app.run_screen, timeout=5, what="dialog closed")
            await wait_until(pilot, lambda: app.session.meta.agent == spec, timeout=30, what="switch saved")
            await pilot.press("q")

"""The TUI's sessions screen (`s`) names the folder it lists, and says how to start when it is empty."""
from __future__ import annotations

import tempfile
from pathlib import Path

from tui.screens.sessions import SessionsScreen
from tui.testing import SESSION_ID, screen_text, static_app
from tui_helpers import wait_until

SIZE = (160, 48)


async def test_the_sessions_screen_names_its_folder(tmp_path: Path):
    app = static_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen) and SESSION_ID in screen_text(app))
        assert f"Sessions in {tmp_path / '.warpsmith' / 'sessions'}" in screen_text(app)


async def test_an_empty_sessions_screen_says_where_it_looked_and_how_to_start(tmp_path: Path):
    app = static_app(tmp_path)
    # A short folder: pytest-xdist's temporary paths are long enough to wrap into the next pane.
    elsewhere = Path(tempfile.mkdtemp(prefix="ws-")) / "elsewhere"
    async with app.run_test(size=SIZE) as pilot:
        app.push_screen(SessionsScreen(SESSION_ID, base=elsewhere))
        await wait_until(pilot, lambda: "no sessions under" in screen_text(app), what="empty message")
        text = " ".join(screen_text(app).split())
        assert f"no sessions under {elsewhere / '.warpsmith' / 'sessions'}" in text
        assert "warpsmith run TASK" in text

"""Notifications never hide the decision bar or the status line: a toast raised while a decision
is open sits above both, however tall the bar is; in a dialog opened over it too."""
from __future__ import annotations

from pathlib import Path

import pytest

from textual.geometry import Region

from tui.screens.ideas import IdeasScreen
from tui.testing import make_app
from tui.toasts import TOAST_RACK_ID
from tui.widgets.decision import DecisionBar
from tui.widgets.status import StatusBar
from tui_helpers import wait_prompt, wait_until


def toast_regions(screen) -> list[Region]:
    rack = screen.get_child_by_id(TOAST_RACK_ID)
    return [t.region for t in rack.query("Toast") if t.region.height]


def overlaps(a: Region, b: Region) -> bool:
    return bool(a.intersection(b).area)


@pytest.mark.parametrize("size", [(160, 48), (80, 24)])
async def test_a_toast_sits_above_an_open_decision(tmp_path: Path, size):
    app = make_app(tmp_path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await wait_prompt(pilot, app, 1)
        bar, status = app.run_screen.query_one(DecisionBar), app.run_screen.query_one(StatusBar)
        app.notify("a long notification that wraps over more than one line of the toast, " * 2, timeout=30)
        app.notify("and a second one stacked on it", severity="warning", timeout=30)
        await wait_until(pilot, lambda: len(toast_regions(app.screen)) == 2, what="two toasts on screen")
        await pilot.pause(0.1)
        assert bar.display and bar.region.height >= 2
        for toast in toast_regions(app.screen):
            assert not overlaps(toast, bar.region), (toast, bar.region)
            assert not overlaps(toast, status.region), (toast, status.region)
            assert toast.bottom <= bar.region.y
        await pilot.press("q")


async def test_a_toast_in_a_dialog_over_the_decision_stays_above_it_too(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await wait_prompt(pilot, app, 1)
        bar = app.run_screen.query_one(DecisionBar)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, IdeasScreen))
        app.screen.notify("a toast raised while the ideas dialog is open", timeout=30)
        await wait_until(pilot, lambda: toast_regions(app.screen), what="toast in the dialog")
        await pilot.pause(0.1)
        assert all(t.bottom <= bar.region.y for t in toast_regions(app.screen))
        await pilot.press("escape")
        await pilot.press("q")

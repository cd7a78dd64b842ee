"""Snapshots (pytest-textual-snapshot): fixed events, fixed session id, fixed pack catalog.

No loop thread runs here: the events a loop would post are applied in order, so every run
renders the same screen. Update after reviewing: pytest tests/tui/test_snapshots.py --snapshot-update
"""
from __future__ import annotations

from pathlib import Path

from tui.widgets.bench import BenchPane
from tui.widgets.reasoning import ReasoningPane
from tui.testing import demo_catalog, demo_events, demo_sources, feed, present_decision, softmax_task, static_app
from tui_helpers import wait_settled, wait_until


def _app(tmp_path: Path, upto: str):
    task = softmax_task()
    old, new = demo_sources(task)
    events = demo_events(task, old, new, upto)
    app = static_app(tmp_path)
    app.pack_catalog = demo_catalog(tmp_path / "packs")

    async def run_before(pilot) -> None:
        await feed(app, events, {1: old, 2: new})
        if upto == "decide":
            present_decision(app, events)
            await wait_until(pilot, lambda: app.decider.shown_at is not None)
        # The bench's roofline column: the hardware pack's figure, worked out off the UI thread.
        await wait_until(pilot, lambda: app.run_screen.query_one(BenchPane).roof_ready)
        # The decision prompt shrinks the anchored reasoning pane; its re-scroll to the bottom
        # lands a frame or two later, and Textual's compositor moves an anchored pane's scrollbar
        # position without repainting the bar, so the thumb could be drawn from either frame.
        pane = app.run_screen.query_one(ReasoningPane)
        await wait_settled(pilot, pane)
        pane.vertical_scrollbar.refresh()
        await pilot.pause()

    return app, run_before


def test_main_screen_mid_stream(snap_compare, tmp_path):
    app, run_before = _app(tmp_path, "stream")
    assert snap_compare(app, run_before=run_before, terminal_size=(160, 48))


def test_decision_prompt(snap_compare, tmp_path):
    """160 columns: the diff takes the width (100+ columns of code), reasoning above the bench."""
    app, run_before = _app(tmp_path, "decide")
    assert snap_compare(app, run_before=run_before, terminal_size=(160, 48))


def test_decision_prompt_100(snap_compare, tmp_path):
    """100x30 (an SSH window beside an editor): tabs (three panes don't fit); the decision bar is
    compact; every key that applies shows, on two lines."""
    app, run_before = _app(tmp_path, "decide")
    assert snap_compare(app, run_before=run_before, terminal_size=(100, 30))


def test_decision_prompt_220(snap_compare, tmp_path):
    """220 columns: the column beside the diff is a quarter of the width."""
    app, run_before = _app(tmp_path, "decide")
    assert snap_compare(app, run_before=run_before, terminal_size=(220, 50))


def test_pack_picker(snap_compare, tmp_path):
    app, run_before = _app(tmp_path, "stream")

    async def open_picker(pilot) -> None:
        await run_before(pilot)
        await pilot.press("p")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "PackPickerScreen")
        await pilot.pause()

    assert snap_compare(app, run_before=open_picker, terminal_size=(160, 48))


def test_narrow_80x24(snap_compare, tmp_path):
    app, run_before = _app(tmp_path, "decide")
    assert snap_compare(app, run_before=run_before, terminal_size=(80, 24))


def test_history_and_a_candidate_reopened(snap_compare, tmp_path):
    """h after a 3-candidate session (kept, reverted, rejected by a rule), then Enter on #2: its diff
    against #1 (the incumbent it was measured against), verdict, decision and reasoning."""
    from tui.screens.history import CandidateScreen, HistoryScreen
    from tui.testing import make_app

    app = make_app(tmp_path, auto=True)
    app.pack_catalog = demo_catalog(tmp_path / "packs")

    async def run_before(pilot) -> None:
        await wait_until(pilot, lambda: app.state.phase == "ended", 60)
        await wait_until(pilot, lambda: app.run_screen.query_one(BenchPane).roof_ready)
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.loaded)
        await pilot.press("up", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, CandidateScreen))
        await pilot.pause(0.3)

    assert snap_compare(app, run_before=run_before, terminal_size=(160, 40))

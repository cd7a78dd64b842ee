"""Notifications (toasts) sit above the decision bar and the status line, never over them.

Textual docks every screen's toasts at the bottom right, one row above the bottom (the footer):
over the status line and an open decision prompt, for the seconds a person is reading them. The
decision bar's height varies (its reason may wrap; it disappears once decided), so the margin is
measured, not fixed in CSS: the rows from the top of the decision bar (or of the status line when
no decision is open) to the bottom of the screen. It is applied to the run screen's toasts and to
those of any dialog above it, whenever the run screen's layout or the current screen changes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from textual.css.query import NoMatches

from tui.widgets.decision import DecisionBar
from tui.widgets.status import StatusBar

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import Screen

TOAST_RACK_ID = "textual-toastrack"  # Textual's id for the container it mounts on every screen


def reserved_rows(run_screen: "Screen") -> int | None:
    """Rows at the bottom of `run_screen` toasts must leave free; None before its first layout."""
    try:
        bar, status = run_screen.query_one(DecisionBar), run_screen.query_one(StatusBar)
    except NoMatches:
        return None
    top = bar.region.y if bar.display and bar.region.height else status.region.y
    if not status.region.height:
        return None
    return max(1, run_screen.size.height - top)


def place_toasts(app: "App", run_screen: "Screen") -> None:
    rows = reserved_rows(run_screen)
    if rows is None:
        return
    for screen in app.screen_stack:
        try:
            rack = screen.get_child_by_id(TOAST_RACK_ID)
        except NoMatches:
            continue
        if rack.styles.margin.bottom != rows:  # a change re-lays out the screen: only when needed
            rack.styles.margin = (0, 0, rows, 0)


def keep_toasts_clear(run_screen: "Screen") -> None:
    """Call once the run screen is mounted: from then on its toasts, and any dialog's, keep clear."""
    app = run_screen.app
    run_screen.screen_layout_refresh_signal.subscribe(run_screen, lambda _s: place_toasts(app, run_screen))
    app.screen_change_signal.subscribe(
        run_screen, lambda _s: run_screen.call_after_refresh(place_toasts, app, run_screen))

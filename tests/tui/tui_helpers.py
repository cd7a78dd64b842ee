"""Shared helpers for the TUI tests (a unique module name: test folders share sys.path)."""
from __future__ import annotations

import time
from typing import Callable


class FakeClock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


async def wait_until(pilot, pred: Callable[[], object], timeout: float = 20.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or pred}")
        await pilot.pause(0.02)


async def wait_settled(pilot, widget, polls: int = 3, timeout: float = 20.0) -> None:
    """Until `widget`'s size and scroll position stop changing for `polls` polls in a row: an
    anchored pane re-scrolls a frame or two after its container changes size."""
    def shape():
        return widget.size, widget.virtual_size, widget.scroll_y, widget.max_scroll_y
    deadline = time.monotonic() + timeout
    last, same = None, 0
    while same < polls:
        if time.monotonic() > deadline:
            raise AssertionError(f"{widget!r} still moving after {timeout} s")
        await pilot.pause(0.05)
        now = shape()
        same = same + 1 if now == last else 0
        last = now


async def wait_prompt(pilot, app, iteration: int, timeout: float = 20.0) -> None:
    """Until the decision prompt for `iteration` is on screen (and its guard clock started)."""
    await wait_until(pilot, lambda: app.decider.pending is not None and app.decider.pending.iteration == iteration
                     and app.decider.shown_at is not None, timeout, f"decision prompt #{iteration}")


def journal_kinds(app, kind: str) -> list[dict]:
    return [r for r in app.session.journal.read() if r.get("kind") == kind]

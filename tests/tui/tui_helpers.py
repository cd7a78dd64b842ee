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


async def wait_prompt(pilot, app, iteration: int, timeout: float = 20.0) -> None:
    """Until the decision prompt for `iteration` is on screen (and its guard clock started)."""
    await wait_until(pilot, lambda: app.decider.pending is not None and app.decider.pending.iteration == iteration
                     and app.decider.shown_at is not None, timeout, f"decision prompt #{iteration}")


def journal_kinds(app, kind: str) -> list[dict]:
    return [r for r in app.session.journal.read() if r.get("kind") == kind]

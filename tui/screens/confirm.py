"""A yes/no question that dismisses a bool. `y` confirms; Enter never does (no default answer)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("y", "answer(True)", "yes"),
        Binding("n", "answer(False)", "no"),
        Binding("escape", "answer(False)", "no", show=False),
    ]

    def __init__(self, title: str, message: str, yes_label: str = "yes", guard_s: float = 0.0,
                 clock: Callable[[], float] = time.monotonic, purpose: str = "") -> None:
        super().__init__()
        self.title_text, self.message, self.yes_label = title, message, yes_label
        self.purpose = purpose  # what is asked ("quit"), so the app does not ask it twice
        self.guard_s, self.clock = guard_s, clock
        self.shown_at: float | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(self.title_text, id="confirm-title")
            yield Static(self.message, id="confirm-message", markup=False)
            yield Static(f"y  {self.yes_label}     n / Esc  no", id="confirm-keys")

    def on_mount(self) -> None:
        self.call_after_refresh(self._shown)

    def _shown(self) -> None:
        self.shown_at = self.clock()

    def action_answer(self, yes: bool) -> None:
        # "y" typed a moment after the question appeared was meant for the screen below.
        if yes and (self.shown_at is None or self.clock() - self.shown_at < self.guard_s):
            self.notify("key ignored: pressed too soon after the question appeared", severity="warning")
            return
        self.dismiss(yes)

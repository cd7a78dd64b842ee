"""Revert with a reason: the person's words go back to the agent as feedback."""
from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class RevertReasonScreen(ModalScreen["str | None"]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, iteration: int) -> None:
        super().__init__()
        self.iteration = iteration

    def compose(self) -> ComposeResult:
        with Vertical(id="reason-box"):
            yield Static(f"Revert #{self.iteration}: why? (sent to the agent with the next prompt)",
                         id="reason-title")
            yield Input(placeholder="e.g. the 32k chunk loads are serial: pipeline them", id="reason")
            yield Static("Enter  revert with this reason     Esc  back to the decision", id="reason-keys")

    @on(Input.Submitted, "#reason")
    def submit(self, event: Input.Submitted) -> None:
        reason = event.value.strip()
        if not reason:
            self.notify("type a reason, or Esc to go back", severity="warning")
            return
        self.dismiss(reason)

    def action_cancel(self) -> None:
        self.dismiss(None)

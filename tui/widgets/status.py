"""Status line: decision-mode badge, task, agent and model, packs, iteration, tokens, cost, GPU."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tui.state import RunState


def status_text(state: RunState) -> Text:
    t = Text()  # wraps on narrow terminals rather than cutting the GPU name off
    badge = " AUTO " if state.mode == "auto" else " MANUAL "
    t.append(badge, style="bold black on yellow" if state.mode == "auto" else "bold white on blue")
    if state.paused:
        t.append(" PAUSED ", style="bold black on magenta")
    t.append(f" {state.phase} ", style="italic")
    t.append("│ ", style="dim")
    t.append(state.task or "-", style="bold")
    t.append(f" #{state.iteration} │ {state.agent or '-'} │ packs ")
    t.append(",".join(state.packs) if state.packs else "none")
    t.append(f" │ tok {state.input_tokens}/{state.output_tokens} ${state.cost_usd:.2f} │ {state.device or '-'}")
    return t


class StatusBar(Static):
    def show(self, state: RunState) -> None:
        self.update(status_text(state))

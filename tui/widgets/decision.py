"""The decision prompt: a bar above the status line (the diff and bench stay visible)."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from harness.loop import DecisionRequest


def prompt_text(req: DecisionRequest, compact: bool = False) -> Text:
    t = Text()
    t.append(f"Decide #{req.iteration}: ", style="bold")
    t.append("harness recommends ")
    t.append(req.action.upper(), style="bold green" if req.action == "keep" else "bold red")
    t.append(f" — {req.reason}")  # reasons carry their own parentheses and colons
    t.append("\n")
    if req.can_keep:
        t.append("k", style="bold reverse")
        confirm = "" if req.action == "keep" else (" (override?)" if compact else " (asks to confirm: override)")
        t.append(" keep" + confirm + "   ")
    else:
        t.append("cannot be kept   ", style="red")
    t.append("r", style="bold reverse")
    t.append(" revert   ")
    t.append("R", style="bold reverse")
    t.append(" revert+why" if compact else " revert with a reason for the agent   (Enter and Space never decide)")
    return t


class DecisionBar(Static):
    def ask(self, req: DecisionRequest, compact: bool = False) -> None:
        self.update(prompt_text(req, compact))
        self.remove_class("-sent")
        self.display = True

    def sent(self, action: str) -> None:
        self.update(Text(f"{action} sent: writing it to the journal…", style="italic"))
        self.add_class("-sent")

    def clear(self) -> None:
        self.display = False

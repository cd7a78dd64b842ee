"""The decision prompt: a bar above the status line (the diff and bench stay visible)."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from harness.loop import DecisionRequest


def prompt_text(req: DecisionRequest) -> Text:
    t = Text()
    t.append(f"Decide #{req.iteration}: ", style="bold")
    t.append("harness recommends ")
    t.append(req.action.upper(), style="bold green" if req.action == "keep" else "bold red")
    t.append(f" ({req.reason})")
    t.append("\n")
    if req.can_keep:
        t.append("k", style="bold reverse")
        t.append(" keep" + (" (asks to confirm: override)" if req.action != "keep" else "") + "   ")
    else:
        t.append("cannot be kept   ", style="red")
    t.append("r", style="bold reverse")
    t.append(" revert   ")
    t.append("R", style="bold reverse")
    t.append(" revert with a reason for the agent   (Enter and Space never decide)", style="")
    return t


class DecisionBar(Static):
    def ask(self, req: DecisionRequest) -> None:
        self.update(prompt_text(req))
        self.remove_class("-sent")
        self.display = True

    def sent(self, action: str) -> None:
        self.update(Text(f"{action} sent: writing it to the journal…", style="italic"))
        self.add_class("-sent")

    def clear(self) -> None:
        self.display = False

"""Standing ideas: high-level directions that go into every following prompt until removed."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option


class IdeasScreen(ModalScreen["list[str] | None"]):
    """Dismisses the edited list (None when nothing changed)."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("escape", "done", "done"),
        Binding("delete,ctrl+d", "remove", "remove idea"),
    ]

    def __init__(self, ideas: list[str], prefill: str = "") -> None:
        super().__init__()
        self.original = list(ideas)
        self.ideas = list(ideas)
        self.prefill = prefill  # a started idea (the profile screen's picked line) to finish

    def compose(self) -> ComposeResult:
        with Vertical(id="ideas-box"):
            yield Static("Ideas for the agent (you give the direction, the loop finds the parameters)",
                         id="ideas-title")
            # A started idea is to be finished, not replaced: no select-all on focus.
            yield Input(self.prefill, placeholder="e.g. the 32k chunk loads are serial: pipeline them", id="idea-input",
                        select_on_focus=not self.prefill)
            yield OptionList(*self._options(), id="idea-list")
            yield Static("Enter  add     Tab  to the list, Del  remove     Esc  done (applies from the next "
                         "prompt)", id="ideas-keys")

    def _options(self) -> list[Option]:
        return [Option(Text(idea), id=str(i)) for i, idea in enumerate(self.ideas)]  # (a str is read as markup)

    def _reload(self) -> None:
        ol = self.query_one("#idea-list", OptionList)
        ol.clear_options()
        ol.add_options(self._options())

    @on(Input.Submitted, "#idea-input")
    def add(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if text and text not in self.ideas:
            self.ideas.append(text)
            self._reload()
        event.input.value = ""

    def action_remove(self) -> None:
        ol = self.query_one("#idea-list", OptionList)
        if ol.highlighted is None or not self.ideas:
            self.notify("highlight an idea in the list first (Tab)", severity="warning")
            return
        del self.ideas[ol.highlighted]
        self._reload()

    def action_done(self) -> None:
        self.dismiss(None if self.ideas == self.original else list(self.ideas))

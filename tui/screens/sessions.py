"""Sessions under ./.warpsmith: what each decided and kept; resume one from the shell."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from harness.sessions.journal import results_rows
from harness.invocation import command
from harness.sessions.session import Session, SessionError, list_sessions, no_sessions_message, sessions_root


@dataclass
class SessionRow:
    id: str
    task: str
    agent: str
    decided: int
    kept: int


def session_rows(base: Path | None = None) -> list[SessionRow]:
    rows = []
    for root in list_sessions(base):
        try:
            s = Session.open(root.name, base)
        except SessionError:
            continue
        decided = results_rows(s.journal.read())
        rows.append(SessionRow(s.id, s.meta.task, s.meta.agent, len(decided),
                               sum(r["decision"].startswith("keep") for r in decided)))
    return rows


class SessionsScreen(ModalScreen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [Binding("escape,q,s", "close", "close"), Binding("c", "copy", "copy resume command")]

    def __init__(self, current: str, base: Path | None = None) -> None:
        super().__init__()
        self.current, self.base = current, base

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-box"):
            yield Static(f"Sessions in {sessions_root(self.base)} (this one marked *)", id="sessions-title",
                         markup=False)
            table: DataTable = DataTable(id="sessions", cursor_type="row")
            table.add_columns("", "id", "task", "agent", "decided", "kept")
            yield table
            yield Static(f"resume one: {command('sessions resume ID')}     c  copy that command     Esc  close",
                         id="sessions-keys")

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="sessions")
    def load(self) -> None:
        rows = session_rows(self.base)  # reads every journal: off the UI thread
        self.app.call_from_thread(self._fill, rows)

    def _fill(self, rows: list[SessionRow]) -> None:
        table = self.query_one("#sessions", DataTable)
        if not rows:  # where it looked, and how to start one
            self.query_one("#sessions-title", Static).update(no_sessions_message(self.base))
        for r in rows:
            cells = ("*" if r.id == self.current else "", r.id, r.task, r.agent, str(r.decided), str(r.kept))
            table.add_row(*(Text(c) for c in cells), key=r.id)  # (a str cell is read as markup)
        table.focus()

    def action_copy(self) -> None:
        table = self.query_one("#sessions", DataTable)
        if not table.row_count:
            return
        sid = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        self.app.copy_to_clipboard(command(f"sessions resume {sid}"))
        self.notify(f"copied: {command(f'sessions resume {sid}')}")

    def action_close(self) -> None:
        self.dismiss(None)

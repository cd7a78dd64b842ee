"""Every key, in one place."""
from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown
from harness.invocation import command

KEYS = [
    ("k", "keep the candidate (asks to confirm when the harness recommends revert: journalled as an override; "
          "a candidate that failed correctness, a guard or a rule can never be kept)"),
    ("K", "keep for the task's [[buckets]] the candidate wins only; revert it elsewhere (a per-bucket keep: "
          "`sessions export` then writes a dispatcher)"),
    ("r", "revert (veto)"),
    ("R", "revert with a typed reason that goes back to the agent"),
    ("i", "ideas: standing directions for the agent, in every following prompt until removed"),
    ("m", "switch agent or model (from the next proposal; journalled)"),
    ("a", "toggle auto mode: follow the harness's recommendation, the open decision included"),
    ("space", "pause / resume the loop (takes effect before the next proposal)"),
    ("p", "pack picker: [x] on, [ ] off, Space toggles, a applies (from the next prompt; journalled, so "
          "a resume keeps it). A rules pack you add is enforced; the task's own are enforced even when off"),
    ("v", "diff: unified / split (side by side)"),
    ("f", "diff: whole candidate / diff (the whole candidate opens at column 0)"),
    ("z", "maximise the focused pane / restore it (Esc restores too); the decision prompt stays in view"),
    ("h", "history: every candidate of the session (verdict, × per shape, decision, who, veto reason); "
          "Enter reopens one's diff against its incumbent, verdict and reasoning, read-only; Esc back"),
    ("←/→", "in the diff pane: scroll sideways 8 columns (long lines, split view); shift+←/→ line start / end"),
    ("tab", "move focus between panes (the focused pane has a heavy border); keys like ←/→ act on it"),
    ("c", "copy the candidate to the clipboard (OSC 52; tmux needs `set -g set-clipboard on`)"),
    ("b", "terminal bell on decisions: on / off"),
    ("1 2 3", "narrow terminals (under 120 columns): reasoning / diff / bench tab"),
    ("t", "task details"),
    ("s", "sessions"),
    ("?", "this help"),
    ("ctrl+p", "command palette: every action that applies now, by name (type `keep`, `pack`, `diff`...)"),
    ("q ctrl+q", "quit (asks if an evaluation is running; the session is saved either way)"),
]

NOTES = """
Decisions are never made by **Enter** or **Space**, and a key pressed within ~300 ms of a
decision prompt appearing is ignored. Every decision is written to the session journal before
the screen moves on; `{resume}` reopens a session with its history.

The bell is on by default; `WARPSMITH_BELL=0` turns it off for a session.
`TEXTUAL_COLOR_SYSTEM` (truecolor, 256, 16) forces a colour system, e.g. under tmux without `Tc`.

`--no-mouse` leaves the mouse to the terminal (native selection over SSH); otherwise hold
Shift (Option on macOS) while dragging to select.
"""


def help_markdown() -> str:
    rows = "\n".join(f"| `{k}` | {what} |" for k, what in KEYS)
    return f"# Keys\n\n| key | does |\n|---|---|\n{rows}\n" + NOTES.format(resume=command("sessions resume ID"))


class HelpScreen(ModalScreen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [Binding("escape,q,question_mark", "close", "close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "keys"
            box.border_subtitle = "↑ ↓ PgUp PgDn scroll · Esc close"  # it is longer than a small terminal
            yield Markdown(help_markdown())

    def action_close(self) -> None:
        self.dismiss(None)

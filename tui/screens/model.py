"""Switch agent or model mid-session: type a spec or pick one; shows each model's rule record.

A spec that can't start (no key, a local server that doesn't answer, a missing script folder) is
refused here, in the dialog, with what to set: accepted, it would fail only at the next proposal.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Input, OptionList, Static

from tui.state import ModelStats

SUGGESTIONS = [
    "tuner",
    "anthropic:claude-sonnet-4-5",
    "anthropic:claude-opus-4-1",
    "openai:gpt-5",
    "openai-compat:http://localhost:8000/v1#MODEL",
]


class ModelScreen(ModalScreen["str | None"]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [Binding("escape", "cancel", "cancel")]

    def __init__(self, current: str, stats: dict[str, ModelStats]) -> None:
        super().__init__()
        self.current, self.stats = current, stats

    def compose(self) -> ComposeResult:
        with Vertical(id="model-box"):
            yield Static(Text(f"Agent now: {self.current or '-'} (the switch applies from the next proposal)"),
                         id="model-title")
            yield Input(placeholder="tuner | script:DIR | anthropic:MODEL | openai:MODEL | "
                                    "openai-compat:URL#MODEL", id="model-input")
            # markup=False: messages name config sections such as [anthropic], which markup would eat.
            yield Static("", id="model-problem", markup=False)
            yield OptionList(*SUGGESTIONS, id="model-suggestions")
            table: DataTable = DataTable(id="model-stats", show_cursor=False)
            table.add_columns("agent:model", "candidates", "broke DSL", "broke a rule")
            for name, s in self.stats.items():
                table.add_row(Text(name), str(s.candidates), str(s.dsl_breaks), str(s.rule_breaks))
            yield table
            yield Static("Enter  switch     Tab  suggestions (Enter copies one up)     Esc  cancel",
                         id="model-keys")

    @on(OptionList.OptionSelected, "#model-suggestions")
    def pick(self, event: OptionList.OptionSelected) -> None:
        inp = self.query_one("#model-input", Input)
        inp.value = str(event.option.prompt)
        inp.focus()

    @on(Input.Submitted, "#model-input")
    def submit(self, event: Input.Submitted) -> None:
        spec = event.value.strip()
        if not spec:
            self.notify("type an agent spec, or Esc", severity="warning")
            return
        self.show_problem(f"checking {spec} ...")
        self.run_worker(self.check(spec), exclusive=True, group="check")

    async def check(self, spec: str) -> None:
        # Local: the preflight pulls in the agents' SDKs (~40 modules), paid only when the dialog checks.
        from harness.agents.preflight import agent_problem

        # In a thread: reading the config is quick, but a connection attempt may wait its timeout.
        problem = await asyncio.to_thread(agent_problem, spec)
        if problem:
            self.show_problem(f"cannot switch: {problem}")
            self.query_one("#model-input", Input).focus()
        else:
            self.dismiss(spec)

    def show_problem(self, text: str) -> None:
        box = self.query_one("#model-problem", Static)
        box.update(text)
        box.set_class(bool(text) and not text.startswith("checking"), "-error")
        box.display = bool(text)

    def action_cancel(self) -> None:
        self.dismiss(None)

"""Where the time goes: the task's end-to-end step, kernel by kernel, and a line to start an idea from.

The measurement (harness.model.step_profile) runs in a separate process, never in the UI's: it imports
the incumbent kernel, and on a GPU it takes seconds. A thread worker waits for it and posts a typed
message back (harlequin's pattern). The result is cached in the session folder per incumbent, so
reopening the screen is instant; `r` measures again. `n` makes a task of the highlighted op, its
shapes from the step (harness.authoring.optask), in the folder warpsmith runs in, also in a worker.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from harness import invocation
from harness.evaluate.process import scrubbed_env
from harness.evaluate.sandbox import confine
from harness.model.step_profile import StepProfile, StepRow, header_lines, kernel_lines

PROFILE_FILE = "step_profile.json"
TIMEOUT_S = 600


@dataclass
class ProfilePick:
    """What the screen dismisses with: the row a person picked, and the idea text it starts."""

    row: StepRow
    profile: StepProfile
    prefill: str


class OpTaskMade(Message):
    """`n`'s result: the lines to show (what was written and what to run next), or why not."""

    def __init__(self, lines: list[str], error: str = "") -> None:
        super().__init__()
        self.lines, self.error = lines, error


class ProfileMeasured(Message):
    def __init__(self, profile: StepProfile | None, error: str = "") -> None:
        super().__init__()
        self.profile, self.error = profile, error


Runner = Callable[[], StepProfile]


def subprocess_runner(task: Any, candidate: Path, pack: str, label: str) -> Runner:
    """The real measurement: `python -m harness.model.step_profile` in a child process, under the same
    sandbox as the evaluator's children (the incumbent is agent-written code), with the evaluator's
    scrubbed environment; the profile comes back on its stdout."""

    def run() -> StepProfile:
        import torch  # local: start-up time (torch takes seconds), paid only when a profile runs

        gpu = torch.cuda.is_available()
        repo = str(Path(__file__).resolve().parent.parent.parent)
        cmd = [sys.executable, "-m", "harness.model.step_profile", str(task.root), str(candidate), "-o", "-"]
        if pack:
            cmd += ["--pack", pack]
        argv, env, cleanup = confine(cmd, scrubbed_env(on_gpu=gpu), gpu, [task.root, Path(candidate)], repo)
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, cwd=repo)
        finally:
            cleanup()
        if r.returncode != 0:
            last = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
            raise RuntimeError(last[:300])
        p = StepProfile.from_json(json.loads((r.stdout.strip().splitlines() or ["{}"])[-1]))
        p.candidate = label
        return p

    return run


def _pct(v: float | None) -> str:
    return f"{100 * v:.0f}%" if v is not None else "-"


class ProfileScreen(ModalScreen[ProfilePick | None]):
    """Dismisses the picked row (Enter) or None (Esc)."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("escape", "close", "close"),
        Binding("r", "remeasure", "measure again"),
        Binding("n", "new_task", "task of this op"),
    ]

    def __init__(self, runner: Runner, cache: Path | None = None, label: str = "",
                 task_dir: Path | None = None) -> None:
        super().__init__()
        self.runner, self.cache, self.label = runner, cache, label
        self.task_dir = task_dir  # where `n` writes kernels/NAME (default: the current folder)
        self.profile: StepProfile | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="profile-box"):
            yield Static("Where one step of the model spends its time", id="profile-title")
            yield Static("measuring the task's end-to-end step...", id="profile-summary")
            yield DataTable(id="profile-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="profile-kernel")
            yield Static("Enter  an idea from this line    n  a task of this op    r  measure again    Esc  close",
                         id="profile-keys")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("#", "what", "share", "us/step", "launches", "roofline", "bound", "step gain")
        cached = self._cached()
        if cached is not None:
            self._show(cached)
        else:
            self.measure()

    def _cached(self) -> StepProfile | None:
        if self.cache is None or not self.cache.is_file():
            return None
        try:
            p = StepProfile.load(self.cache)
        except (OSError, ValueError, KeyError, TypeError):
            return None  # unreadable: measure again rather than show half a table
        return p if p.candidate == self.label else None

    @work(thread=True, exclusive=True, group="step-profile")
    def measure(self) -> None:
        try:
            p = self.runner()
        except Exception as e:  # noqa: BLE001 - one line on the screen, never a dead app
            self.post_message(ProfileMeasured(None, f"{type(e).__name__}: {e}"))
            return
        if self.cache is not None:
            try:
                p.save(self.cache)
            except OSError:
                pass  # shown anyway; only the cache is lost
        self.post_message(ProfileMeasured(p))

    @on(ProfileMeasured)
    def measured(self, message: ProfileMeasured) -> None:
        if message.profile is None:
            self.query_one("#profile-summary", Static).update(
                Text(f"the profile could not be measured: {message.error}", style="bold red"))
            return
        self._show(message.profile)

    def _show(self, p: StepProfile) -> None:
        self.profile = p
        # Text objects, not markup: kernel names carry brackets (`void at::native::...<float>[...]`).
        self.query_one("#profile-summary", Static).update(Text("\n".join(header_lines(p))))
        self.query_one("#profile-kernel", Static).update(Text("\n".join(kernel_lines(p))))
        table = self.query_one(DataTable)
        table.clear()
        for i, r in enumerate(p.rows, 1):
            t = r.device_us if p.measured else r.roofline_us
            # Long kernel names cut (C++ templates run to hundreds of characters); --json has them whole.
            name = r.name if len(r.name) <= 44 else r.name[:43] + "…"
            table.add_row(str(i), Text(name), _pct(r.share),
                          f"{t:.1f}" if t is not None and p.measured else (f"{t:.4f}" if t is not None else "-"),
                          f"{r.launches:.0f}" if p.measured else "-", _pct(r.roofline_pct), r.bound,
                          f"{r.gain:.2f}x" if r.gain is not None else "-", key=str(i - 1))
        table.focus()

    @on(DataTable.RowSelected)
    def picked(self, event: DataTable.RowSelected) -> None:
        if self.profile is None or event.row_key.value is None:
            return
        row = self.profile.rows[int(event.row_key.value)]
        self.dismiss(ProfilePick(row, self.profile, row.idea_context(self.profile)))

    def _highlighted(self) -> StepRow | None:
        if self.profile is None:
            return None
        row = self.query_one(DataTable).cursor_row
        return self.profile.rows[row] if 0 <= row < len(self.profile.rows) else None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "new_task":  # only where the step recorded the op's call
            row = self._highlighted()
            return row is not None and row.example is not None
        return True

    @on(DataTable.RowHighlighted)
    def _highlight_moved(self) -> None:
        self.refresh_bindings()

    def action_new_task(self) -> None:
        row, p = self._highlighted(), self.profile
        if row is None or p is None or row.example is None:
            return
        self.query_one("#profile-kernel", Static).update(Text(f"making a task of {row.name}..."))
        self.make_task(row.example, f"{p.workload}, on {p.device}")

    @work(thread=True, exclusive=True, group="op-task")
    def make_task(self, example: dict, origin: str) -> None:
        from harness.authoring.newtask import NewTaskError  # torch (seconds): only when a task is made
        from harness.authoring.optask import describe, make_op_task

        try:
            t = make_op_task(example, origin, self.task_dir or Path.cwd())
        except NewTaskError as e:
            self.post_message(OpTaskMade([], str(e)))
            return
        except Exception as e:  # noqa: BLE001 - one line on the screen, never a dead app
            self.post_message(OpTaskMade([], f"{type(e).__name__}: {e}"))
            return
        name = t.made.root.name
        self.post_message(OpTaskMade([
            f"wrote {t.made.root}: the task {name}, {describe(example)} (from {t.source}; "
            f"made again with `{invocation.command(t.command)}`)",
            f"  incumbent: {t.made.incumbent_why}",
            f"next: {invocation.command(f'tasks validate {name}')}  then  {invocation.command(f'run {name}')}"]))

    @on(OpTaskMade)
    def op_task_made(self, message: OpTaskMade) -> None:
        text = Text("\n".join(message.lines)) if not message.error else Text(
            f"no task made: {message.error}", style="bold red")
        self.query_one("#profile-kernel", Static).update(text)

    def action_remeasure(self) -> None:
        self.query_one("#profile-summary", Static).update("measuring the task's end-to-end step...")
        self.measure()

    def action_close(self) -> None:
        self.dismiss(None)

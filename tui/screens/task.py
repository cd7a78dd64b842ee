"""Task details: what the candidates must compute, on which shapes, to which tolerance."""
from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Markdown

from harness.authoring.tasks import Task


def task_markdown(task: Task) -> str:
    def shapes(title: str, items) -> str:
        rows = "\n".join(f"| {s.name} | {', '.join(f'{k}={v}' for k, v in s.dims.items())} | "
                         f"{', '.join(s.tags) or '-'} |" for s in items)
        return f"## {title}\n\n| shape | dims | tags |\n|---|---|---|\n{rows}\n" if items else ""
    tol = "\n".join(f"- {dt}: atol {t.atol:g}, rtol {t.rtol:g}" for dt, t in task.tolerance.items())
    return (f"# {task.name}\n\n{task.summary}\n\n"
            f"- DSL: **{task.dsl}** (candidates must launch it from `{task.entry}`)\n"
            f"- dtypes: {', '.join(task.dtypes)}\n- rules packs: {', '.join(task.rules) or '-'}\n"
            f"- folder: `{task.root}`\n\n"
            + shapes("Shapes (GPU)", task.shapes) + "\n"
            + shapes("Shapes (interpreter, no GPU)", task.interpreter_shapes)
            + f"\n## Tolerance\n\n{tol}\n")


class TaskScreen(ModalScreen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [Binding("escape,q,t", "close", "close")]

    def __init__(self, task: Task) -> None:
        super().__init__()
        self.task_ = task

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="task-box"):
            yield Markdown(task_markdown(self.task_))

    def action_close(self) -> None:
        self.dismiss(None)

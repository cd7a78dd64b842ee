"""What the run screen and the history view need of the app that hosts them.

A Protocol, so that tui/screens/run.py and tui/screens/history.py type against this and not against
tui.app.WarpsmithApp: the app builds the run screen, and the screens must not import the app back
(import-linter, pyproject.toml). WarpsmithApp satisfies it: it owns the loop, its thread and the
decider; the run screen owns the actions (keep, revert, ideas, model, packs, ...) and calls these.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from harness.loop import DecisionReply, Loop
    from harness.sessions.session import Session
    from harness.authoring.tasks import Task
    from tui.decider import TuiDecider
    from tui.state import RunState


class RunHost(Protocol):
    task_: Task
    session: Session
    state: RunState
    decider: TuiDecider
    loop: Loop | None
    decision_sent: str  # the action sent to the loop, until its Decision event arrives
    diff_mode: str
    bell_enabled: bool
    pack_catalog: Any  # a fixed harness.authoring.packs.Catalog (tests); None: discover on open
    clock: Callable[[], float]

    # Textual's App methods the screens call on their host.
    def push_screen(self, screen: Any, callback: Callable[[Any], Any] | None = None) -> Any: ...
    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...
    def call_later(self, callback: Callable[..., Any], *args: Any) -> Any: ...
    def run_worker(self, work: Any, *args: Any, **kwargs: Any) -> Any: ...
    def copy_to_clipboard(self, text: str) -> None: ...

    # The loop's side, which the app keeps.
    def _send(self, reply: DecisionReply) -> None: ...  # a decision to the waiting loop
    def _set_agent(self, spec: str) -> None: ...  # (on a worker thread)
    def edit_ideas_to(self, ideas: list[str]) -> None: ...
    def profile_target(self) -> tuple[Path, str]: ...
    def is_hardware_pack(self, pack_id: str) -> bool: ...
    def request_quit(self) -> None: ...

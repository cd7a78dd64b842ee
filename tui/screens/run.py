"""The main screen: reasoning | diff | bench side by side, tabs below ~120 columns.

All keys live here (modal screens pushed above it have their own, so typing an idea never
triggers a decision). Bindings that don't apply right now are hidden via check_action.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.events import Resize
from textual.screen import Screen
from textual.widgets import Footer, TabbedContent, TabPane

from tui.widgets.bench import BenchPane
from tui.widgets.decision import DecisionBar
from tui.widgets.diff import DiffPane
from tui.widgets.reasoning import ReasoningPane
from tui.widgets.status import StatusBar

if TYPE_CHECKING:
    from tui.app import WarpsmithApp

NARROW_BELOW = 120  # columns: three readable panes need about 40 each
DECISION_ACTIONS = {"keep", "revert", "revert_reason", "keep_buckets"}


class RunScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "#reasoning"
    BINDINGS = [
        Binding("k", "keep", "keep"),
        Binding("K", "keep_buckets", "keep buckets"),
        Binding("r", "revert", "revert"),
        Binding("R", "revert_reason", "revert+why"),
        Binding("i", "ideas", "ideas"),
        Binding("m", "model", "model"),
        Binding("a", "auto", "auto"),
        Binding("space", "pause", "pause"),
        Binding("p", "packs", "packs"),
        Binding("v", "split", "split", show=False),
        Binding("f", "full", "full", show=False),
        Binding("c", "copy", "copy", show=False),
        Binding("b", "bell", "bell", show=False),
        Binding("t", "task", "task", show=False),
        Binding("s", "sessions", "sessions", show=False),
        Binding("1", "tab('tab-reasoning')", "reasoning", show=False),
        Binding("2", "tab('tab-diff')", "diff", show=False),
        Binding("3", "tab('tab-bench')", "bench", show=False),
        Binding("question_mark", "help", "help"),
        Binding("q", "quit_app", "quit"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.narrow: bool | None = None

    @property
    def wapp(self) -> "WarpsmithApp":
        return self.app  # type: ignore[return-value]

    # -- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        if self.narrow is None:
            self.narrow = self.app.size.width < NARROW_BELOW
        self.set_class(self.narrow, "-narrow")
        if self.narrow:
            with TabbedContent(id="tabs"):
                with TabPane("reasoning 1", id="tab-reasoning"):
                    yield ReasoningPane(id="reasoning")
                with TabPane("diff 2", id="tab-diff"):
                    yield DiffPane(id="diff")
                with TabPane("bench 3", id="tab-bench"):
                    yield BenchPane(id="bench")
        else:
            with Horizontal(id="panes"):
                yield ReasoningPane(id="reasoning")
                yield DiffPane(id="diff")
                yield BenchPane(id="bench")
        yield DecisionBar(id="decision")
        yield StatusBar(id="status")
        yield Footer()

    async def on_mount(self) -> None:
        await self.redraw({"reasoning", "diff", "bench", "status", "decision"})

    async def on_resize(self, event: Resize) -> None:
        narrow = event.size.width < NARROW_BELOW
        if self.narrow is not None and narrow != self.narrow:
            self.narrow = narrow
            await self.recompose()
            await self.redraw({"reasoning", "diff", "bench", "status", "decision"})

    def on_screen_resume(self) -> None:
        # Back from a modal with a question open: the guard restarts, the prompt just reappeared.
        if self.wapp.decider.pending is not None and not self.wapp.decision_sent:
            self.call_after_refresh(self.wapp.decider.mark_shown)

    async def redraw(self, areas: set[str]) -> None:
        # Events keep arriving while the app shuts down or the layout is being recomposed; the
        # state has them, and the next full redraw (on_mount, on_resize) shows them.
        try:
            await self._redraw(areas)
        except NoMatches:
            pass

    async def _redraw(self, areas: set[str]) -> None:
        state = self.wapp.state
        if "reasoning" in areas:
            await self.query_one(ReasoningPane).sync(state)
        if "diff" in areas:
            diff = self.query_one(DiffPane)
            diff.mode = self.wapp.diff_mode
            diff.show(state.candidate)
        if "bench" in areas:
            self.query_one(BenchPane).show(state)
        if "status" in areas:
            self.query_one(StatusBar).show(state)
        if "decision" in areas:
            bar = self.query_one(DecisionBar)
            req = self.wapp.decider.pending
            if req is None:
                bar.clear()
            else:
                bar.ask(req, compact=bool(self.narrow))
                if self.wapp.decision_sent:
                    bar.sent(self.wapp.decision_sent)
            # Only decisions change which keys apply; the footer rebuilds itself on every refresh.
            self.refresh_bindings()

    # -- bindings -----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "keep_buckets" and not self.wapp.task_.buckets:
            return False  # hidden: the task declares no [[buckets]]
        if action in DECISION_ACTIONS:
            return self.wapp.decider.pending is not None and not self.wapp.decision_sent
        if action == "tab":
            return bool(self.narrow)
        return True

    def action_keep(self) -> None:
        self.wapp.keep()

    def action_keep_buckets(self) -> None:
        self.wapp.keep_buckets()

    def action_revert(self) -> None:
        self.wapp.revert()

    def action_revert_reason(self) -> None:
        self.wapp.revert_with_reason()

    def action_ideas(self) -> None:
        self.wapp.edit_ideas()

    def action_model(self) -> None:
        self.wapp.switch_model()

    def action_auto(self) -> None:
        self.wapp.toggle_auto()

    def action_pause(self) -> None:
        self.wapp.toggle_pause()

    def action_packs(self) -> None:
        self.wapp.pick_packs()

    def action_task(self) -> None:
        self.wapp.show_task()

    def action_sessions(self) -> None:
        self.wapp.show_sessions()

    def action_help(self) -> None:
        self.wapp.show_help()

    def action_quit_app(self) -> None:
        self.wapp.request_quit()

    def action_copy(self) -> None:
        self.wapp.copy_candidate()

    def action_bell(self) -> None:
        self.wapp.bell_enabled = not self.wapp.bell_enabled
        self.notify(f"bell on decisions {'on' if self.wapp.bell_enabled else 'off'}")

    async def action_split(self) -> None:
        app = self.wapp
        app.diff_mode = "unified" if app.diff_mode == "split" else "split"
        await self.redraw({"diff"})

    async def action_full(self) -> None:
        app = self.wapp
        app.diff_mode = "unified" if app.diff_mode == "full" else "full"
        await self.redraw({"diff"})

    def action_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab


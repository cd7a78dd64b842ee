"""The main screen: reasoning | diff | bench side by side, tabs below ~120 columns.

All keys live here (modal screens pushed above it have their own, so typing an idea never
triggers a decision). Bindings that don't apply right now are hidden via check_action; the
command palette (ctrl+p) offers the same actions, those that apply now (palette_commands).
"""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from textual.actions import parse
from textual.app import ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.events import Resize
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import TabbedContent, TabPane

from harness.model.dispatch import bucket_results
from harness.invocation import command
from harness.loop import DecisionReply
from tui.screens.confirm import ConfirmScreen
from tui.screens.decide import RevertReasonScreen
from tui.screens.help import HelpScreen
from tui.screens.ideas import IdeasScreen
from tui.screens.model import ModelScreen
from tui.screens.packs import PackPickerScreen
from tui.screens.sessions import SessionsScreen
from tui.screens.task import TaskScreen
from tui.toasts import keep_toasts_clear
from tui.widgets.bench import BenchPane
from tui.widgets.decision import DecisionBar
from tui.widgets.diff import DiffPane
from tui.widgets.keys import KeysBar
from tui.widgets.reasoning import ReasoningPane
from tui.widgets.status import StatusBar

if TYPE_CHECKING:
    from tui.host import RunHost

NARROW_BELOW = 120  # columns: three readable panes need about 40 each
DECIDING_SIDE = 42  # columns left of the diff while deciding (reasoning above the bench)
DECISION_ACTIONS = {"keep", "revert", "revert_reason", "keep_buckets"}
LOOP_ACTIONS = {"ideas", "model", "auto", "pause", "packs"}  # steer the next proposals

# The command palette's entry for each binding's action: (title, what it does). Titles hold the
# words people type ("keep", "pack", "diff"); the key is added to the help line.
PALETTE = {
    "keep": ("Keep the candidate", "asks to confirm against a revert recommendation"),
    "keep_buckets": ("Keep buckets: keep for the buckets it wins only", "reverted everywhere else"),
    "revert": ("Revert the candidate", "veto"),
    "revert_reason": ("Revert with a reason (revert+why)", "your words go back to the agent"),
    "ideas": ("Ideas for the agent", "standing directions in every following prompt"),
    "model": ("Model: switch agent or model", "from the next proposal"),
    "auto": ("Auto mode", "follow the harness's recommendation"),
    "pause": ("Pause the loop", "before its next proposal"),
    "packs": ("Packs: pick the prompt's packs", "from the next prompt"),
    "split": ("Diff: unified / split", "side by side or one column"),
    "maximize": ("Maximise the focused pane / restore it", "z again or Esc restores"),
    "history": ("History: every candidate of the session", "Enter reopens one's diff, verdict and reasoning"),
    "full": ("Diff: whole candidate / diff", "the candidate's whole source"),
    "copy": ("Copy the candidate", "to the clipboard (OSC 52)"),
    "bell": ("Bell on decisions", "the terminal bell when a decision waits"),
    "task": ("Task details", "shapes, tolerance, rules"),
    "sessions": ("Sessions", "this folder's sessions; how to resume one"),
    "tab('tab-reasoning')": ("Show the reasoning tab", "narrow layout"),
    "tab('tab-diff')": ("Show the diff tab", "narrow layout"),
    "tab('tab-bench')": ("Show the bench tab", "narrow layout"),
    "help": ("Help: every key", "keys and notes"),
    "profile": ("Profile: where the model step spends its time", "pick a line to start an idea from it"),
}


class RunScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "#reasoning"
    # A maximised pane keeps the decision prompt, the status and the keys in view.
    ALLOW_IN_MAXIMIZED_VIEW = "DecisionBar, StatusBar, KeysBar"
    # Help and quit first: the keys bar takes a second line when one can't hold them (tui/widgets/keys.py)
    # and leaves out the last ones when two can't; every binding is in the palette and the help screen.
    BINDINGS = [
        Binding("question_mark", "help", "help"),
        Binding("q", "quit_app", "quit"),
        Binding("k", "keep", "keep"),
        Binding("K", "keep_buckets", "keep buckets"),
        Binding("r", "revert", "revert"),
        Binding("R", "revert_reason", "revert+why"),
        Binding("i", "ideas", "ideas"),
        Binding("m", "model", "model"),
        Binding("a", "auto", "auto"),
        Binding("space", "pause", "pause"),
        Binding("p", "packs", "packs"),
        Binding("w", "profile", "where time goes", show=False),
        Binding("z", "maximize", "max pane"),
        Binding("h", "history", "history"),
        Binding("v", "split", "split", show=False),
        Binding("f", "full", "full", show=False),
        Binding("c", "copy", "copy", show=False),
        Binding("b", "bell", "bell", show=False),
        Binding("t", "task", "task", show=False),
        Binding("s", "sessions", "sessions", show=False),
        Binding("1", "tab('tab-reasoning')", "reasoning", show=False),
        Binding("2", "tab('tab-diff')", "diff", show=False),
        Binding("3", "tab('tab-bench')", "bench", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.narrow: bool | None = None

    @property
    def wapp(self) -> "RunHost":
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
        yield KeysBar(id="keys")

    async def on_mount(self) -> None:
        keep_toasts_clear(self)  # notifications sit above the decision bar and status line (tui/toasts.py)
        await self.redraw({"reasoning", "diff", "bench", "status", "decision"})

    def _size_deciding(self) -> None:
        """The column left of the diff while deciding: a quarter of the width, but never under
        DECIDING_SIDE (the bench's speedup, band and roof columns), so at 160 columns the diff
        keeps 100 columns of code."""
        try:
            panes = self.query_one("#panes")
        except NoMatches:
            return  # narrow: tabs
        panes.styles.grid_columns = f"{max(DECIDING_SIDE, self.size.width // 4)} 1fr"

    async def on_resize(self, event: Resize) -> None:
        self._size_deciding()
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
            # While deciding the diff gets most of the width (run.tcss): the change is what is decided.
            self.set_class(req is not None and not self.wapp.decision_sent, "-deciding")
            self._size_deciding()
            # Only decisions change which keys apply; the footer rebuilds itself on every refresh.
            self.refresh_bindings()
        if "status" in areas and self.wapp.state.phase == "ended":
            self.refresh_bindings()  # the loop controls no longer apply

    # -- bindings -----------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "keep_buckets" and not self.wapp.task_.buckets:
            return False  # hidden: the task declares no [[buckets]]
        if action in DECISION_ACTIONS:
            pending = self.wapp.decider.pending
            if pending is None or self.wapp.decision_sent:
                return False
            if action in ("keep", "keep_buckets") and not pending.can_keep:
                return False  # failed a check: only revert applies (hidden, not just refused)
            return True
        if action in LOOP_ACTIONS and self.wapp.state.phase == "ended":
            return False  # no loop left to steer
        if action == "tab":
            return bool(self.narrow)
        return True

    # `deliberate`: run from the command palette, where nothing is typed by accident (the
    # early-keypress guard is for keys; closing the palette restarts it, see on_screen_resume).
    def action_keep(self, deliberate: bool = False) -> None:
        """`deliberate`: chosen in the command palette (no early-keypress guard); else a key."""
        app = self.wapp
        verdict = app.decider.check_keep(deliberate)
        if not verdict.accepted:
            app.notify(verdict.message, severity="warning")
            return
        if not verdict.needs_confirmation:
            app._send(DecisionReply("keep", "human"))
            return
        req = app.decider.pending
        assert req is not None

        def answered(yes: bool | None) -> None:
            if yes:
                app._send(DecisionReply("keep", "human", confirmed_override=True))

        app.push_screen(ConfirmScreen(
            f"Keep #{req.iteration} against the recommendation?",
            f"The harness recommends revert: {req.reason}\n\nKeeping it makes it the new best and is "
            "journalled as an override.", "keep it (override)", app.decider.key_guard_s, app.clock),
            answered)

    def action_keep_buckets(self, deliberate: bool = False) -> None:
        """Keep the candidate for the task's buckets it wins, and revert it everywhere else."""
        app = self.wapp

        verdict = app.decider.check_revert(deliberate)  # same rules as any decision key: waiting, not too soon
        if not verdict.accepted:
            app.notify(verdict.message, severity="warning")
            return
        req = app.decider.pending
        assert req is not None
        if not app.task_.buckets:
            app.notify(f"{app.task_.name} declares no [[buckets]] in its task.toml", severity="warning")
            return
        if not req.can_keep:
            app.notify("cannot keep: the candidate failed a correctness check, a guard or a rule",
                       severity="warning")
            return
        results = bucket_results(app.task_, req.verdict)
        wins = [r.bucket for r in results if r.wins]
        if not wins:
            app.notify("it wins no bucket: " + "; ".join(f"{r.bucket}: {r.reason}" for r in results),
                       severity="warning")
            return
        app._send(DecisionReply("revert", "human", f"kept for the {', '.join(wins)} bucket(s) only",
                                buckets=wins))

    def action_revert(self, deliberate: bool = False) -> None:
        app = self.wapp
        verdict = app.decider.check_revert(deliberate)
        if not verdict.accepted:
            app.notify(verdict.message, severity="warning")
            return
        app._send(DecisionReply("revert", "human"))

    def action_revert_reason(self, deliberate: bool = False) -> None:
        app = self.wapp
        verdict = app.decider.check_revert(deliberate)
        if not verdict.accepted:
            app.notify(verdict.message, severity="warning")
            return
        req = app.decider.pending
        assert req is not None

        def answered(reason: str | None) -> None:
            if reason:
                app._send(DecisionReply("revert", "human", reason))

        app.push_screen(RevertReasonScreen(req.iteration), answered)

    def action_ideas(self) -> None:
        app = self.wapp
        def answered(ideas: list[str] | None) -> None:
            if ideas is not None:
                app.edit_ideas_to(ideas)

        app.push_screen(IdeasScreen(app.state.ideas), answered)

    def action_model(self) -> None:
        app = self.wapp
        def answered(spec: str | None) -> None:
            if spec:
                app.run_worker(lambda: app._set_agent(spec), thread=True, group="model")

        app.push_screen(ModelScreen(app.state.agent, app.state.model_stats), answered)

    def action_auto(self) -> None:
        app = self.wapp
        pending = app.decider.pending
        # Journalled before the open candidate's Decision: the mode changed, then the policy decided it.
        app.session.set_decision_mode("manual" if app.decider.auto else "auto")
        answered = app.decider.set_auto(not app.decider.auto)
        app.state.mode = "auto" if app.decider.auto else "manual"
        msg = f"decisions: {app.state.mode}"
        if answered is not None and pending is not None:
            app.decision_sent = answered.action
            msg += f"; #{pending.iteration} decided by the policy: {answered.action}"
        app.notify(msg)
        app.call_later(self.redraw, {"status", "decision"})

    def action_pause(self) -> None:
        app = self.wapp
        if app.loop is None:
            app.notify("the loop has not started yet", severity="warning")
            return
        app.state.paused = not app.state.paused
        if app.state.paused:
            app.loop.pause()
            app.notify("paused: the loop stops before its next proposal")
        else:
            app.loop.resume()
            app.notify("resumed")
        app.call_later(self.redraw, {"status"})

    def action_packs(self) -> None:
        app = self.wapp
        def answered(ids: list[str] | None) -> None:
            if ids is None:
                return
            # Journalled now (PacksSelected: what a resume reads), so a quit before the next
            # prompt keeps it; the loop picks it up from the next prompt.
            still = [i for i in enforced if i in app.state.packs and i not in ids]  # just turned off
            app.session.set_packs(ids)
            app.state.packs = list(ids)
            app.notify("packs: " + (", ".join(ids) or "none") + " (from the next prompt)"
                       + (f"; the rules of {', '.join(still)} are still enforced" if still else ""))
            app.call_later(self.redraw, {"status"})

        # The guard applies the task's own whatever the selection; unselecting one only takes its
        # text out of the prompt.
        enforced = app.task_.enforced_rules_packs
        app.push_screen(PackPickerScreen(app.state.packs, app.pack_catalog, enforced, app.task_.name),
                        answered)

    def action_task(self) -> None:
        app = self.wapp
        app.push_screen(TaskScreen(app.task_))

    def action_profile(self) -> None:
        """The step profile (tui/screens/profile.py); a picked line opens the ideas dialog with the
        line's context filled in, and the finished idea is journalled with the line it came from."""
        # Local: start-up time; the profile and history screens are loaded when first opened.
        from tui.screens.profile import PROFILE_FILE, ProfilePick, ProfileScreen, subprocess_runner

        app = self.wapp
        if not app.task_.e2e:
            self.notify(f"{app.task_.name} has no end-to-end workload (no e2e = in its task.toml): nothing to "
                        f"profile beyond the kernel itself ({command('profile TASK')})", severity="warning")
            return
        src, label = app.profile_target()
        pack = next((p for p in app.state.packs if app.is_hardware_pack(p)), "")
        runner = subprocess_runner(app.task_, src, pack, label)

        def finished(ideas: list[str] | None, pick: ProfilePick) -> None:
            if ideas is None:
                return
            added = [i for i in ideas if i not in app.state.ideas and i.startswith(pick.prefill.split(". Idea:")[0])]
            app.edit_ideas_to(ideas)
            for idea in added:
                app.session.idea_from_profile(idea, pick.row, pick.profile)

        def picked(pick: ProfilePick | None) -> None:
            if pick is not None:
                app.push_screen(IdeasScreen(app.state.ideas, prefill=pick.prefill),
                                lambda ideas: finished(ideas, pick))

        app.push_screen(ProfileScreen(runner, app.session.root / PROFILE_FILE, label), picked)

    def action_sessions(self) -> None:
        app = self.wapp
        app.push_screen(SessionsScreen(app.session.id, app.session.root.parent.parent.parent))

    def action_help(self) -> None:
        app = self.wapp
        app.push_screen(HelpScreen())

    def action_quit_app(self) -> None:
        self.wapp.request_quit()

    def action_copy(self) -> None:
        app = self.wapp
        c = app.state.candidate
        if c is None:
            app.notify("no candidate yet", severity="warning")
            return
        app.copy_to_clipboard(c.new)  # OSC 52: reaches the local clipboard over SSH
        # OSC 52 asks the terminal to set the clipboard; nothing says whether it did (tmux drops
        # it unless set-clipboard is on), so say what was sent, not that it was copied.
        app.notify(f"sent candidate #{c.iteration} ({len(c.new.splitlines())} lines) to the terminal's "
                   "clipboard (OSC 52; under tmux: set -g set-clipboard on)")

    def action_bell(self) -> None:
        self.wapp.bell_enabled = not self.wapp.bell_enabled
        self.notify(f"bell on decisions {'on' if self.wapp.bell_enabled else 'off'}")

    def action_maximize(self) -> None:
        """Textual's maximize, on the pane that holds the focus (not a widget inside it); z again
        (or Esc) restores."""
        if self.maximized is not None:
            self.minimize()
            return
        node = self.focused
        while node is not None and not (isinstance(node, Widget) and node.has_class("pane")):
            node = node.parent
        if node is None:
            self.notify("no pane has the focus (tab moves it)", severity="warning")
            return
        self.maximize(node, container=False)

    def action_history(self) -> None:
        from tui.screens.history import open_history  # local: start-up time, loaded when first opened

        open_history(self.wapp)

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
        self._focus_pane(tab)

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane is not None and event.pane.id:
            self._focus_pane(event.pane.id)

    def _focus_pane(self, tab: str) -> None:
        # Focus follows the shown tab. Left on a pane in a hidden tab, focus is dropped, and the
        # screen's AUTO_FOCUS brings it back to #reasoning when a modal closes, which switches the
        # tab back to reasoning (TabbedContent shows the tab that holds the focused widget).
        try:
            pane = self.query_one(f"#{tab} .pane")
        except NoMatches:
            return
        if self.focused is not pane:
            pane.focus()

    # -- command palette ------------------------------------------------------------------------
    def palette_commands(self) -> Iterator[SystemCommand]:
        """The palette's entries: every action in PALETTE whose binding applies now (check_action
        as for the footer), each running the binding's action, as its key would."""
        for b in self.BINDINGS:
            assert isinstance(b, Binding)
            if b.action not in PALETTE:
                continue
            _, name, params = parse(b.action)
            if not self.check_action(name, params):
                continue
            title, what = PALETTE[b.action]
            if name == "pause" and self.wapp.state.paused:
                title, what = "Resume the loop", "paused now"
            elif name in ("auto", "bell"):
                on = self.wapp.decider.auto if name == "auto" else self.wapp.bell_enabled
                title += ": turn off" if on else ": turn on"
            action = f"{name}(True)" if name in DECISION_ACTIONS else b.action
            yield SystemCommand(title, f"{self.app.get_key_display(b)} · {what}",
                                partial(self.run_action, action))


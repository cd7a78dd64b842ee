"""WarpsmithApp: a view and a keyboard over the loop.

The loop runs in its own daemon thread and only posts typed messages to the app (harlequin's
pattern); the UI thread never waits on the agent, the compiler or the GPU. A plain daemon thread
rather than a textual thread worker: workers run in the event loop's default executor, which is
joined at exit, so quitting during a minutes-long evaluation would hang.

The one place the loop waits on the UI is TuiDecider.decide(); every decision is journalled by
the loop before its Decision event reaches the screen, and the prompt stays up until then.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Callable, Iterable

from textual.app import App, SystemCommand
from textual.message import Message
from textual.screen import Screen

from harness import events as ev
from harness.sessions.history import SessionHistory
from harness.invocation import command
from harness.loop import Decider, DecisionReply, DecisionRequest, Loop
from harness.authoring.packs import PackError, discover
from harness.sessions.session import Session, SessionError
from harness.authoring.tasks import Task
from harness.wiring import RunConfig, build_loop, make_agent, start_session
from tui.decider import DEFAULT_KEY_GUARD_S, DecisionAborted, TuiDecider
from tui.markup import Markup, plain
from tui.screens.confirm import ConfirmScreen
from tui.screens.run import RunScreen
from tui.state import RunState

LoopFactory = Callable[[Decider, Callable[[ev.Event], None]], Loop]


class LoopEvent(Message):
    def __init__(self, event: ev.Event, old_source: str | None = None) -> None:
        super().__init__()
        self.event, self.old_source = event, old_source


class HistoryReplayed(Message):
    """A resumed session's journal, as events, before the loop starts again."""

    def __init__(self, events: list[ev.Event], old_source: str | None) -> None:
        super().__init__()
        self.events, self.old_source = events, old_source


class DecisionRequested(Message):
    def __init__(self, request: DecisionRequest) -> None:
        super().__init__()
        self.request = request


class LoopFinished(Message):
    def __init__(self, reason: str, error: str = "") -> None:
        super().__init__()
        self.reason, self.error = reason, error


def journal_events(session: Session) -> tuple[list[ev.Event], str | None]:
    """The journal's records that are events (others, like PromptPacks, are skipped) and the
    incumbent source of the last candidate, for its diff."""
    out: list[ev.Event] = SessionHistory.of(session).events()
    last = next((e for e in reversed(out) if isinstance(e, ev.CandidateProposed)), None)
    old = None
    if last is not None and last.incumbent:
        try:
            old = session.workspace.source(last.incumbent)
        except Exception:
            old = None
    return out, old


class WarpsmithApp(App[int]):
    # Widgets can't carry a CSS_PATH of their own: each widget's .tcss sits beside it, loaded here.
    CSS_PATH = [Path(__file__).with_name("app.tcss"),
                *sorted((Path(__file__).parent / "widgets").glob("*.tcss"))]
    TITLE = "warpsmith"

    def __init__(self, task: Task, session: Session, cfg: RunConfig, *,
                 loop_factory: LoopFactory | None = None, resumed: bool = False,
                 key_guard_s: float = DEFAULT_KEY_GUARD_S, clock: Callable[[], float] = time.monotonic,
                 bell: bool = True, start_loop: bool = True, replay: bool | None = None) -> None:
        super().__init__()
        self.task_, self.session, self.cfg = task, session, cfg
        self.resumed = resumed
        self.replay = resumed if replay is None else replay
        self.clock = clock
        self.bell_enabled = bell
        self.start_loop = start_loop
        self.loop_factory = loop_factory or self._default_factory
        self.loop: Loop | None = None
        self.loop_thread: threading.Thread | None = None
        self.decider = TuiDecider(lambda req: self.post_message(DecisionRequested(req)), auto=cfg.auto,
                                  key_guard_s=key_guard_s, clock=clock)
        self.state = RunState(session_id=session.id, task=task.name, agent=cfg.agent,
                              packs=list(session.meta.packs), mode="auto" if cfg.auto else "manual",
                              ideas=list(session.meta.ideas))
        self.diff_mode = "unified"
        self.decision_sent = ""  # the action sent to the loop, until its Decision event arrives
        self.run_screen = RunScreen()
        self.quitting = False
        self.pack_catalog = None  # a fixed harness.authoring.packs.Catalog (tests); None: discover on open

    def _default_factory(self, decider: Decider, emit: Callable[[ev.Event], None]) -> Loop:
        return build_loop(self.session, self.task_, self.cfg, decider, emit, resumed=self.resumed)

    # -- lifecycle ----------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.push_screen(self.run_screen)
        if self.start_loop:
            self.loop_thread = threading.Thread(target=self._run_loop, name="warpsmith-loop", daemon=True)
            self.loop_thread.start()

    def _emit(self, e: ev.Event) -> None:
        """Called on the loop's thread: git work for the diff happens here, not on the UI thread."""
        old = None
        if isinstance(e, ev.CandidateProposed) and e.incumbent:
            try:
                old = self.session.workspace.source(e.incumbent)
            except Exception:
                old = ""
        self.post_message(LoopEvent(e, old))

    def _run_loop(self) -> None:
        try:
            if self.replay:
                events, old = journal_events(self.session)
                self.post_message(HistoryReplayed(events, old))
            self.loop = self.loop_factory(self.decider, self._emit)
            reason = self.loop.run()
            self.post_message(LoopFinished(reason))
        except DecisionAborted:
            self.post_message(LoopFinished("quit with a decision open: resume asks it again"))
        except Exception as e:  # shown on screen; the journal has everything up to here
            self.post_message(LoopFinished(f"loop failed: {e}", traceback.format_exc()))

    # -- messages from the loop thread ------------------------------------------------------
    async def on_loop_event(self, message: LoopEvent) -> None:
        e = message.event
        areas = self.state.apply(e, message.old_source)
        if isinstance(e, ev.HardwarePackChosen):
            # Which hardware pack the session chose for this GPU, and why (or that none matched).
            self.notify(e.reason, markup=False, timeout=8,
                        severity="warning" if e.pack_id is None else "information")
        if isinstance(e, ev.Decision):
            self.decision_sent = ""
            areas |= {"decision"}
        await self.run_screen.redraw(areas)

    async def on_history_replayed(self, message: HistoryReplayed) -> None:
        for e in message.events:
            self.state.apply(e, message.old_source if isinstance(e, ev.CandidateProposed) else None)
        self.state.mode = "auto" if self.decider.auto else "manual"
        await self.run_screen.redraw({"reasoning", "diff", "bench", "status"})

    async def on_decision_requested(self, message: DecisionRequested) -> None:
        self.decision_sent = ""
        await self.run_screen.redraw({"decision", "status"})
        if self.screen is self.run_screen:
            self.call_after_refresh(self.decider.mark_shown)
        if self.bell_enabled:
            self.bell()

    async def on_loop_finished(self, message: LoopFinished) -> None:
        if message.error:
            self.state.note(self.state.iteration, f"**{message.reason}**\n\n```\n{message.error}\n```", "error")
            self.notify(message.reason, severity="error", timeout=10)
        self.state.phase = "ended"
        self.state.ended = self.state.ended or message.reason
        await self.run_screen.redraw({"reasoning", "status", "decision"})

    # -- decisions ----------------------------------------------------------------------------
    def _send(self, reply: DecisionReply) -> None:
        if self.decider.reply(reply):
            self.decision_sent = reply.action
            self.call_later(self.run_screen.redraw, {"decision"})

    # -- other keys ---------------------------------------------------------------------------
    def edit_ideas_to(self, ideas: list[str]) -> None:
        self.run_worker(lambda: self._set_ideas(ideas), thread=True, group="ideas")

    def profile_target(self) -> tuple[Path, str]:
        """The incumbent as a file for the step profile, and its label (the cache's key)."""
        try:
            commit = self.session.workspace.best
            source = self.session.workspace.source(commit)
        except Exception:  # noqa: BLE001 - no readable incumbent (a broken repo): the task's baseline
            return self.task_.baseline_path, str(self.task_.baseline_path)
        path = self.session.work / "incumbent_for_step_profile.py"
        path.write_text(source)
        return path, commit

    def is_hardware_pack(self, pack_id: str) -> bool:
        try:
            return (self.pack_catalog or discover()).get(pack_id).kind == "hardware"
        except (KeyError, PackError):
            return False

    def _set_ideas(self, ideas: list[str]) -> None:
        # Journalled (fsync) off the UI thread; IdeasChanged comes back as an event.
        if self.loop is not None:
            self.loop.set_ideas(ideas)
        else:
            self.session.set_ideas(ideas)
            self.post_message(LoopEvent(ev.IdeasChanged(list(ideas))))

    def _set_agent(self, spec: str) -> None:
        try:
            agent = make_agent(spec, self.session, self.cfg)
        except Exception as e:  # unknown agent, missing key, bad folder: say which and keep the old one
            # markup=False: the message names config sections ([anthropic]) that markup would eat
            self.call_from_thread(self.notify, f"cannot switch to {spec}: {e}", severity="error", timeout=8,
                                  markup=False)
            return
        # Resume continues with the model the person switched to.
        self.cfg.agent = spec
        self.session.meta.agent = spec
        self.session.meta.options = {**self.session.meta.options, "agent": spec}
        self.session.save_meta()
        if self.loop is not None:
            self.loop.set_agent(agent)
        self.call_from_thread(self.notify, f"agent: {spec} from the next proposal")

    def request_quit(self) -> None:
        if any(isinstance(s, ConfirmScreen) and s.purpose == "quit" for s in self.screen_stack):
            return  # already asking (q then ctrl+q): one question is enough
        if self.state.phase == "evaluating":
            def answered(yes: bool | None) -> None:
                if yes:
                    self.shutdown()

            self.push_screen(ConfirmScreen(
                "Quit during an evaluation?",
                "The evaluation in progress is dropped; the candidate is committed and journalled, and "
                f"`{command('sessions resume ' + self.session.id)}` evaluates it again.", "quit",
                purpose="quit"), answered)
            return
        self.shutdown()

    async def action_quit(self) -> None:
        # Textual binds ctrl+q (priority, app level) to this action: it gets the same question as `q`.
        self.request_quit()

    def action_help_quit(self) -> None:
        # ctrl+c: Textual's hint names only ctrl+q.
        self.notify(Markup("Press [b]q[/b] or [b]ctrl+q[/b] to quit (it asks during an evaluation; the session is "
                           "saved either way)"), title="Do you want to quit?")

    def notify(self, message: str, *, title: str = "", severity="information", timeout: float | None = None,
               markup: bool = True) -> None:
        """Every notification, the screens' included (they call this one): its text is escaped
        unless written as Markup on purpose (tui/markup.py says why)."""
        if markup:
            message, title = plain(message), plain(title)
        kw = {} if timeout is None else {"timeout": timeout}
        super().notify(message, title=title, severity=severity, markup=markup, **kw)

    # -- command palette (ctrl+p) ---------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Textual's commands, its Quit replaced by ours (it asks during an evaluation), then the
        main screen's actions that apply now (the ones its footer would show enabled)."""
        for command in super().get_system_commands(screen):
            if command.title != "Quit":
                yield command
        yield SystemCommand("Quit", "q · asks during an evaluation; the session is saved either way",
                            self.request_quit)
        if screen is self.run_screen:
            yield from self.run_screen.palette_commands()

    def shutdown(self) -> None:
        self.quitting = True
        if self.loop is not None:
            self.loop.stop()
        self.decider.abort()
        self.exit(0)


def run_app(task: Task, cfg: RunConfig, session_id: str | None = None) -> int:
    """`warpsmith run TASK` (new session) or `warpsmith sessions resume ID` (session_id)."""
    if session_id is None:
        session, resumed = start_session(task, cfg), False
    else:
        try:
            session, resumed = Session.open(session_id), True
        except SessionError as e:
            print(f"warpsmith: {e}", file=sys.stderr)
            return 2
    bell = os.environ.get("WARPSMITH_BELL", "1").lower() not in ("0", "off", "no", "false")
    app = WarpsmithApp(task, session, cfg, resumed=resumed, bell=bell)
    code = app.run(mouse=not cfg.no_mouse)
    if app.loop_thread is not None:
        # Let a loop that is between steps finish its journal line; an evaluation is not waited for.
        app.loop_thread.join(timeout=2.0)
    print(f"session {session.id}: {session.root}")
    print(f"resume: {command(f'sessions resume {session.id}')}")
    return int(code or 0)

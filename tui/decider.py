"""The TUI's Decider: the loop's worker thread blocks here until a person presses a key.

Kept free of textual so that the decision rules (early-keypress guard, what may be kept, auto mode)
are plain Python, tested without a screen. The app gives it a `notify` callable that posts a message
to the UI thread; the UI answers with `reply()` from its own thread.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

from harness.loop import AutoDecider, DecisionReply, DecisionRequest

DEFAULT_KEY_GUARD_S = 0.3  # keys this soon after a prompt appears were meant for something else


class DecisionAborted(Exception):
    """The app is closing with a question open: nothing is journalled, resume asks it again."""


@dataclass
class KeyVerdict:
    """What a keep/revert keypress does right now."""

    accepted: bool
    needs_confirmation: bool = False
    message: str = ""


class TuiDecider:
    def __init__(self, notify: Callable[[DecisionRequest], None], auto: bool = False,
                 key_guard_s: float = DEFAULT_KEY_GUARD_S, clock: Callable[[], float] = time.monotonic):
        self.notify = notify
        self.auto = auto
        self.key_guard_s = key_guard_s
        self.clock = clock
        self._cond = threading.Condition()
        self._pending: DecisionRequest | None = None
        self._reply: DecisionReply | None = None
        self._aborted = False
        self.shown_at: float | None = None

    # -- worker thread ------------------------------------------------------------------------
    def decide(self, request: DecisionRequest) -> DecisionReply:
        if self.auto:  # the policy `--auto` follows (a keep for some buckets only where it says so)
            return AutoDecider().decide(request)
        with self._cond:
            if self._aborted:
                raise DecisionAborted()
            self._pending, self._reply, self.shown_at = request, None, None
        self.notify(request)
        with self._cond:
            while self._reply is None and not self._aborted:
                self._cond.wait()
            reply, self._pending = self._reply, None
            if reply is None:
                raise DecisionAborted()
            return reply

    # -- UI thread ----------------------------------------------------------------------------
    @property
    def pending(self) -> DecisionRequest | None:
        return self._pending

    def open_without_waiting(self, request: DecisionRequest) -> None:
        """Open `request` as the question keys answer, with no loop thread waiting on it (snapshots
        and screenshots: tui.testing.present_decision); what decide() does before it blocks."""
        with self._cond:
            self._pending, self._reply, self.shown_at = request, None, None

    def mark_shown(self) -> None:
        """The prompt is on screen now: the early-keypress guard counts from here."""
        self.shown_at = self.clock()

    def too_soon(self) -> bool:
        return self.shown_at is None or self.clock() - self.shown_at < self.key_guard_s

    def check_keep(self, deliberate: bool = False) -> KeyVerdict:
        """`deliberate`: chosen by name in the command palette, not a key that may have been meant
        for something else, so the early-keypress guard does not apply."""
        req = self._pending
        if req is None:
            return KeyVerdict(False, message="no decision is waiting")
        if not deliberate and self.too_soon():
            return KeyVerdict(False, message="key ignored: pressed too soon after the prompt appeared")
        if not req.can_keep:
            return KeyVerdict(False, message="cannot keep: the candidate failed a correctness check, "
                                             "a guard or a rule; press r to revert")
        if req.action != "keep":
            return KeyVerdict(True, needs_confirmation=True,
                              message=f"the harness recommends revert: {req.reason}")
        return KeyVerdict(True)

    def check_revert(self, deliberate: bool = False) -> KeyVerdict:
        if self._pending is None:
            return KeyVerdict(False, message="no decision is waiting")
        if not deliberate and self.too_soon():
            return KeyVerdict(False, message="key ignored: pressed too soon after the prompt appeared")
        return KeyVerdict(True)

    def set_auto(self, on: bool) -> DecisionReply | None:
        """Auto mode on or off. Turned on while a question is open, the policy answers that one too,
        now: the status says AUTO, so nothing may wait for a key. Returns that answer, if any."""
        with self._cond:
            self.auto = on
            req = self._pending
            if not on or req is None or self._reply is not None or self._aborted:
                return None
            self._reply = AutoDecider().decide(req)
            self._cond.notify_all()
            return self._reply

    def reply(self, reply: DecisionReply) -> bool:
        """Answer the open question; False if there is none (already answered or aborted)."""
        with self._cond:
            if self._pending is None or self._reply is not None or self._aborted:
                return False
            self._reply = reply
            self._cond.notify_all()
            return True

    def abort(self) -> None:
        with self._cond:
            self._aborted = True
            self._cond.notify_all()

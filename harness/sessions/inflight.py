"""The candidates between their IterationStarted and their Decision, shared by the loop's threads.

Proposer threads open and fill them, an evaluator backend's thread marks them ready, and the loop's
own thread takes them in iteration order to decide. One Condition guards all of it; whoever changes
a slot's state notifies, so the waiting thread wakes without polling (the 0.5 s waits only bound how
long a stop takes to be seen).
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from harness.agents.base import Attempt, code_key
from harness.evaluate.records import Verdict


@dataclass
class InFlight:
    """One iteration between IterationStarted and its Decision."""

    iteration: int
    # proposing | evaluating | checking | ready | no-candidate | duplicate | void | failed
    state: str = "proposing"
    commit: str = ""
    description: str = ""
    meta: dict = field(default_factory=dict)
    source: str = ""
    incumbent_commit: str = ""
    incumbent_source: str = ""
    agent: Any = None  # the agent that proposed it (set_agent may swap the loop's before it is decided)
    future: Future | None = None
    verdict: Verdict | None = None
    files: tuple = ()  # (candidate, incumbent) as written for its evaluation
    twin: str = ""  # state duplicate: what it repeats
    error: Exception | None = None  # state failed: raised when its turn to be decided comes

    @property
    def resolved(self) -> bool:
        return self.state in ("ready", "no-candidate", "duplicate", "void", "failed")


class Flight:
    """The slots in flight, by iteration."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self._slots: dict[int, InFlight] = {}

    def __len__(self) -> int:
        return len(self._slots)

    def add(self, slot: InFlight) -> InFlight:
        with self.cv:
            self._slots[slot.iteration] = slot
            self.cv.notify_all()
        return slot

    def remove(self, slot: InFlight) -> None:
        with self.cv:
            self._slots.pop(slot.iteration, None)
            self.cv.notify_all()

    def set(self, slot: InFlight, state: str) -> None:
        with self.cv:
            slot.state = state
            self.cv.notify_all()

    def notify(self) -> None:
        with self.cv:
            self.cv.notify_all()

    def first(self) -> InFlight | None:
        """The lowest iteration in flight: the next to be decided (call holding cv)."""
        return self._slots[min(self._slots)] if self._slots else None

    def twin(self, slot: InFlight, source: str) -> int | None:
        """Another slot in flight with this code (call holding cv). Whatever incumbent it is measured
        against: one measured against a replaced incumbent is measured again before its decision, so
        a second copy would only run the same candidate twice."""
        key = code_key(source)  # the same notion of "same code" as for candidates already measured
        for s in self._slots.values():
            if s is not slot and s.source and code_key(s.source) == key:
                return s.iteration
        return None

    def attempts(self) -> list[Attempt]:
        """What the agent sees of the candidates in flight (outcome "in-flight")."""
        with self.cv:
            return [Attempt(s.iteration, s.description, "in-flight", meta=dict(s.meta))
                    for s in sorted(self._slots.values(), key=lambda s: s.iteration) if s.source]

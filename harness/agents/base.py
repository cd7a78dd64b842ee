"""The one protocol every proposer speaks.

An agent is asked for one candidate at a time and answers with a stream of events: reasoning
text as it comes, usage figures, notices (retries, errors), and at most one Proposal. The stream is
a plain generator so that the loop can run in a worker thread (the TUI's UI thread never waits on
it) and so cancelling is just closing the generator.
"""
from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Iterator, Protocol, Union

from harness.authoring.tasks import Task


@dataclass
class Attempt:
    """What the agent should know about one earlier try (the prompt's compact history)."""

    iteration: int
    description: str
    outcome: str  # kept | reverted | rejected-static | incorrect | crashed | timing | ...
    summary: str = ""  # verdict reasons, rule hits with lines, per-shape timings
    veto_reason: str = ""  # the person's words when they reverted with a reason
    meta: dict = field(default_factory=dict)  # agent-specific, e.g. the tuner's config
    shapes: list[dict] = field(default_factory=list)  # the verdict's per-shape results (times, roofline %)


@dataclass
class ProposalContext:
    task: Task
    iteration: int
    incumbent_source: str
    incumbent_commit: str
    history: list[Attempt] = field(default_factory=list)
    ideas: list[str] = field(default_factory=list)  # the person's standing directions
    prompt: str = ""  # assembled by harness.prompt (packs, task, incumbent, history)
    system: str = ""  # the stable system part (role, DSL, never-do list)
    packs: list[dict] = field(default_factory=list)  # the prompt's packs (provenance: id, path...)
    cancel: threading.Event = field(default_factory=threading.Event)


@dataclass
class ReasoningChunk:
    text: str
    channel: str = "reasoning"  # reasoning | message | tool


@dataclass
class UsageReport:
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0


@dataclass
class Notice:
    level: str  # info | warning | error
    message: str


@dataclass
class Proposal:
    source: str
    description: str
    meta: dict = field(default_factory=dict)


@dataclass
class Exhausted:
    """The agent has nothing more to propose (tuner: no untried neighbour; LLM: fatal error)."""

    reason: str
    fatal: bool = False  # a bad key or unknown model: stop, but the session stays resumable


AgentEvent = Union[ReasoningChunk, UsageReport, Notice, Proposal, Exhausted]


class Agent(Protocol):
    name: str  # "tuner", "anthropic", "openai", "openai-compat", "script"
    model: str  # model id, or "" for agents without one
    # Optional `reads_prompt: bool` (default True): False spares the GPU profile the prompt would carry.

    def propose(self, ctx: ProposalContext) -> Iterator[AgentEvent]: ...


def code_key(source: str) -> str:
    """Identity of a candidate's code, blind to trailing whitespace (editors and models add it)."""
    text = "\n".join(line.rstrip() for line in source.splitlines()).strip()
    return hashlib.sha256(text.encode()).hexdigest()

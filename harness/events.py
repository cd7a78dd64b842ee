"""Typed events the loop emits. The TUI and the headless printer render exactly these.

Every event is a frozen dataclass with a `kind` for JSON (the journal stores `to_dict()`).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.evaluate.records import Finding, Verdict, findings


@dataclass(frozen=True)
class Event:
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["kind"] = type(self).__name__
        return d

    # The names the other typed records use (harness/evaluate/records.py): the same JSON objects.
    def to_json(self) -> dict[str, Any]:
        return self.to_dict()

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Event":
        """The event a journal record holds (its `kind` picks the class; fields it doesn't know are
        dropped, so records of other versions load). TypeError when a field it needs is missing."""
        return from_dict(d)


@dataclass(frozen=True)
class SessionStarted(Event):
    session_id: str
    task: str
    agent: str
    packs: list[dict] = field(default_factory=list)  # [{id, version, sha256}]
    device: str = "cpu"  # GPU name, or "cpu (Triton interpreter)"
    resumed: bool = False
    decision_mode: str = "manual"  # manual | auto


@dataclass(frozen=True)
class IterationStarted(Event):
    iteration: int


@dataclass(frozen=True)
class Reasoning(Event):
    """A chunk of the agent's streamed reasoning or message text."""

    iteration: int
    text: str
    channel: str = "reasoning"  # reasoning | message | tool


@dataclass(frozen=True)
class AgentNotice(Event):
    """Something for a person to read: a retry, a rate limit, an error, why a pack was selected.
    Nothing acts on its words: what a program must act on is an event of its own (AgentSwitched,
    HardwarePackChosen; tests/test_no_meaning_in_words.py)."""

    iteration: int
    level: str  # info | warning | error
    message: str


@dataclass(frozen=True)
class AgentSwitched(Event):
    """A person switched the agent or its model (the TUI's `m`): it proposes from the next iteration.
    (A journal from before this event says it as an AgentNotice "agent switched to ...": a notice.)"""

    iteration: int
    agent: str  # the agent's name: tuner, anthropic, openai, script
    model: str = ""

    @property
    def label(self) -> str:
        """agent:model, as SessionStarted.agent and the status line say it."""
        return f"{self.agent}:{self.model}" if self.model else self.agent


@dataclass(frozen=True)
class HardwarePackChosen(Event):
    """Which hardware pack the session's packs have for this GPU, and why (harness.authoring.packs.HardwareChoice),
    said once before the first iteration; pack_id None: none was chosen, and `reason` says how to pick one."""

    pack_id: str | None
    reason: str  # the line a person reads


@dataclass(frozen=True)
class Usage(Event):
    iteration: int
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    session_cost_usd: float = 0.0


@dataclass(frozen=True)
class CandidateProposed(Event):
    iteration: int
    commit: str
    description: str
    diff: str  # unified diff against the incumbent
    source: str
    agent: str = ""
    model: str = ""
    incumbent: str = ""  # commit of the incumbent it was diffed against


@dataclass(frozen=True)
class StaticResult(Event):
    """The static stage's findings (the verdict's `violations`), as records; the journal's line holds
    their JSON objects, as the evaluator wrote them."""

    iteration: int
    ok: bool
    violations: list[Finding] = field(default_factory=list)

    def __post_init__(self) -> None:  # a journal's line (or a test) hands dicts: read once, here
        object.__setattr__(self, "violations", findings(self.violations))

    def to_dict(self) -> dict[str, Any]:  # (asdict would write a Finding's extra and _keys)
        return {"iteration": self.iteration, "ok": self.ok,
                "violations": [v.to_json() if isinstance(v, Finding) else v for v in self.violations],
                "kind": "StaticResult"}


@dataclass(frozen=True)
class EvalStarted(Event):
    iteration: int
    backend: str = "local"
    worker: str = ""
    call_timeout_s: float | None = None  # the per-call limit in force: a hang costs at most this


@dataclass(frozen=True)
class EvalResult(Event):
    """A candidate's verdict, as its typed record; the journal's line holds its JSON object, the bytes
    the evaluator handed over (Verdict.to_json writes back the keys it read, in their order)."""

    iteration: int
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "verdict": self.verdict.to_json(), "kind": "EvalResult"}


@dataclass(frozen=True)
class Recommendation(Event):
    iteration: int
    action: str  # keep | revert
    reason: str
    can_keep: bool  # False when correctness or a guard failed: never keepable


@dataclass(frozen=True)
class DecisionNeeded(Event):
    iteration: int


@dataclass(frozen=True)
class Decision(Event):
    iteration: int
    action: str  # keep | revert
    by: str  # auto | human | policy | harness (a candidate that cannot be kept, reverted unasked)
    override: bool = False  # a human kept what the harness recommended reverting
    reason: str = ""  # a veto reason, fed back to the agent
    commit: str = ""
    best: str = ""  # commit of the best branch after the decision


@dataclass(frozen=True)
class BucketKeep(Event):
    """A candidate kept for some shape buckets only (harness.model.dispatch.keep_for_buckets writes it)."""

    iteration: int
    commit: str
    buckets: list[str]
    by: str = "human"
    reason: str = ""
    measurements: dict = field(default_factory=dict)  # {bucket: BucketResult.to_dict()}


@dataclass(frozen=True)
class PackReloaded(Event):
    pack_id: str
    ok: bool
    message: str = ""


@dataclass(frozen=True)
class IdeasChanged(Event):
    ideas: list[str]


@dataclass(frozen=True)
class IdeaFromProfile(Event):
    """An idea a person started from a line of the step profile (tui/screens/profile.py): the idea
    as added, the line it came from, and what was profiled, so the idea traces back to evidence."""

    idea: str
    row: dict  # harness.model.step_profile.StepRow as a dict
    workload: str
    device: str
    measured: bool
    candidate: str = ""  # the incumbent that was profiled


@dataclass(frozen=True)
class WorkerStatus(Event):
    workers: list[dict]  # [{name, gpu, state, iteration}]


@dataclass(frozen=True)
class ProfileReady(Event):
    """Where the incumbent's time goes (harness.profiling.profile's dict: ceilings, and per shape bound,
    memory/compute/launch % and a hint), measured once per incumbent on a GPU."""

    iteration: int
    incumbent: str  # commit
    profile: dict


@dataclass(frozen=True)
class SessionEnded(Event):
    reason: str
    best: str = ""
    iterations: int = 0


EVENT_TYPES = {cls.__name__: cls for cls in Event.__subclasses__()}


def from_dict(d: dict[str, Any]) -> Event:
    d = dict(d)
    cls = EVENT_TYPES[d.pop("kind")]
    if cls is EvalResult:  # the verdict's JSON object read into its record (SessionHistory.fold hands one read)
        if isinstance(d.get("verdict"), dict):
            d["verdict"] = Verdict.from_json(d["verdict"])
        elif not isinstance(d.get("verdict"), Verdict):
            raise TypeError("an EvalResult record without a verdict object")
    return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


# -- journal records that are not loop events ----------------------------------------------------
# The journal also holds what a resume needs beside the events (the pack selection, the packs in each
# prompt, a proposal's meta, the decision mode). They are no events: nothing renders them, and
# SessionHistory.events() leaves them out. Their `kind` comes first, as these lines always had it.

@dataclass(frozen=True)
class JournalRecord:
    def to_json(self) -> dict[str, Any]:
        return {"kind": type(self).__name__, **asdict(self)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> "JournalRecord":
        """The record a journal line holds (fields it doesn't know dropped). KeyError for a kind that
        is no JournalRecord; TypeError when a field it needs is missing."""
        cls = RECORD_TYPES[d["kind"]]
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class PacksSelected(JournalRecord):
    """The session's pack selection (on start, and each time a person picks): what a resume takes up."""

    packs: list[str]


@dataclass(frozen=True)
class PromptPacks(JournalRecord):
    """The packs in one iteration's prompt, with versions and hashes: the report's provenance."""

    iteration: int
    packs: list[dict]  # [{id, version, sha256, origin, path, cut_files}]


@dataclass(frozen=True)
class ProposalMeta(JournalRecord):
    """What the agent attached to its proposal (the tuner's configuration): it survives a resume."""

    iteration: int
    meta: dict


@dataclass(frozen=True)
class DecisionMode(JournalRecord):
    """A person switched between deciding each candidate and following the recommendation (TUI `a`)."""

    mode: str  # manual | auto


RECORD_TYPES = {cls.__name__: cls for cls in JournalRecord.__subclasses__()}

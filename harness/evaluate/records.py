"""Typed records of what an evaluation says: Verdict, ShapeResult, Recommendation, Reason, Finding.

A verdict is a JSON object on the wire only: between the evaluator's child and parent, from pool
and Ray workers, `warpsmith eval --json`, and in the journal's bytes (the EvalResult line). It is
read into a `Verdict` once where it comes off the wire (the loop, when a backend hands it over;
`SessionHistory.fold`, when a journal is loaded; the eval command), and from there to the journal's
writer, the TUI, the headless printer, the report and the deciders it travels as this record. These
dataclasses read it (`from_json`) and write it back (`to_json`) key for key and in the same order, so
`json.dumps(Verdict.from_json(d).to_json())` is byte-identical to `json.dumps(d)`: consumers of
`eval --json` and old journals see no change (tests/evaluate/test_records.py,
tests/spine/test_verdict_journal.py). Keys a record doesn't name (added by a stage, a later version,
an e2e check, the backend's `worker`, the loop's `incumbent_commit`) travel in `extra`.

A key a verdict lacks (an old journal, a lost worker's verdict) gets the one default named here, the
same in every reader (tests/spine/test_history.py); the facts readers derive from a verdict again and
again (its outcome, why it can't be kept, the buckets its recommendation names) are its properties.
The evaluator's stages still build the verdict as a dict: it is the wire format, and `to_json` only
writes the keys it read.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

R = TypeVar("R", bound="_Record")
_META = ("extra", "_keys")
NOT_RUN = "not run"  # how a shape's error starts when the evaluation stopped before it (correctness.py)
_STAGE_WORDS = {"static": "the static check", "import": "import", "correctness": "the correctness check",
                "guard": "a runtime guard", "timing": "timing", "e2e": "the end-to-end check"}
_CRASH_RULES = {"crashed", "timeout", "import-error", "oom"}


@dataclass
class _Record:
    def _names(self) -> list[str]:
        return [f.name for f in fields(self) if f.name not in _META]

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        return value

    @classmethod
    def from_json(cls: type[R], d: dict[str, Any]) -> R:
        names = [f.name for f in fields(cls) if f.name not in _META]
        kw = {k: cls._decode(k, d[k]) for k in names if k in d}
        obj = cls(**kw, extra={k: v for k, v in d.items() if k not in names})  # type: ignore[call-arg]
        obj._keys = list(d)  # type: ignore[attr-defined]
        return obj

    def to_json(self) -> dict[str, Any]:
        names = self._names()
        extra: dict = self.extra  # type: ignore[attr-defined]
        keys = self._keys if self._keys is not None else names + list(extra)  # type: ignore[attr-defined]
        out: dict[str, Any] = {}
        for k in keys:
            if k in names:
                out[k] = _encode(getattr(self, k))
            elif k in extra:
                out[k] = extra[k]
        for k, v in extra.items():  # added after reading
            out.setdefault(k, v)
        return out


def _encode(v: Any) -> Any:
    if isinstance(v, _Record):
        return v.to_json()
    if isinstance(v, list) and any(isinstance(x, _Record) for x in v):
        return [_encode(x) for x in v]
    return v


@dataclass
class Recommendation(_Record):
    action: str = "revert"  # keep | revert
    reason: str = ""
    can_keep: bool = False
    extra: dict = field(default_factory=dict, repr=False)
    _keys: list | None = field(default=None, repr=False, compare=False)

    @property
    def buckets(self) -> list[str]:
        """Buckets to keep the candidate for only (harness.evaluate.keep_policy), when it says so."""
        return list(self.extra.get("buckets") or [])

    @classmethod
    def of(cls, verdict: "dict | Verdict") -> "Recommendation | None":
        """A verdict's recommendation; None when it has none (or something else under the key)."""
        if isinstance(verdict, Verdict):
            return verdict.recommended
        rec = verdict.get("recommendation")
        return cls.from_json(rec) if isinstance(rec, dict) else None


@dataclass
class ShapeResult(_Record):
    name: str = ""
    dims: dict = field(default_factory=dict)
    long: bool = False
    protected: bool = False
    correct: bool | None = None
    error: str | None = None
    candidate_us: float | None = None
    incumbent_us: float | None = None
    speedup: float | None = None
    roofline_pct: float | None = None
    candidate_graph_us: float | None = None
    incumbent_graph_us: float | None = None
    noise_pct: float | None = None
    winner: str | None = None  # candidate | incumbent | tie: harness.evaluate.keep_policy, timed shapes only
    extra: dict = field(default_factory=dict, repr=False)
    _keys: list | None = field(default=None, repr=False, compare=False)

    @property
    def ran(self) -> bool:
        """False for a shape the evaluation stopped before (correct is False, and the error says
        "not run: why": harness/evaluate/correctness.py)."""
        return not str(self.error or "").startswith(NOT_RUN)

    @property
    def ok_word(self) -> str:
        """The ok column of a verdict's table: yes, NO, or not run (never NO for a shape never tried)."""
        return "yes" if self.correct else "NO" if self.ran else NOT_RUN


@dataclass
class Reason(_Record):
    """Why a verdict rejects: a stage's rule and its message (process._Run.reject writes them)."""

    rule: str = ""
    message: str = ""
    extra: dict = field(default_factory=dict, repr=False)
    _keys: list | None = field(default=None, repr=False, compare=False)


@dataclass
class Finding(_Record):
    """A static violation located in the candidate: harness.guard's Violation on the wire. A key it
    lacks takes what readers took before: no line (None: the whole file), severity error."""

    rule: str = ""
    message: str = ""
    line: int | None = None  # 1-based
    col: int | None = None  # 1-based
    snippet: str = ""
    severity: str = "error"  # error | warning (a warning goes to the notes, not into the decision)
    extra: dict = field(default_factory=dict, repr=False)
    _keys: list | None = field(default=None, repr=False, compare=False)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


def findings(items: list) -> list:
    """Static violations as records: a dict (the wire form) read into a Finding, anything else left
    as it is (as a verdict leaves a shape that is no object)."""
    return [Finding.from_json(x) if isinstance(x, dict) else x for x in items or []]


@dataclass
class Verdict(_Record):
    accepted: bool = False
    stage: str = ""  # static | import | correctness | guard | timing | done | e2e; "" when a record has none
    reasons: list[Reason] = field(default_factory=list)
    task: str = ""
    candidate: str = ""
    incumbent: str = ""
    candidate_sha256: str = ""
    device: str = ""
    timing_available: bool = False
    shapes: list[ShapeResult] = field(default_factory=list)
    geomean_speedup: float | None = None
    noise_band_pct: float | None = None
    recommendation: Recommendation | None = None
    wall_s: float = 0.0
    violations: list[Finding] = field(default_factory=list)  # the static stage's, errors and warnings
    notes: list = field(default_factory=list)
    output: str = ""
    sandbox: bool = True
    call_timeout_s: float | None = None
    heldout: list[ShapeResult] = field(default_factory=list)  # held-out shapes drawn for this evaluation
    hard_cases: list = field(default_factory=list)
    contract: list = field(default_factory=list)  # the contract cases checked (task.toml [contract])
    extra: dict = field(default_factory=dict, repr=False)
    _keys: list | None = field(default=None, repr=False, compare=False)

    @classmethod
    def empty(cls) -> "Verdict":
        """A verdict of no keys, every field its default: what a reader takes where there is none
        (as the record of `{}`; Verdict() instead says every field)."""
        v = cls()
        v._keys = []
        return v

    @property
    def stage_shown(self) -> str:
        """The stage as every reader prints it: "?" for a verdict that names none."""
        return self.stage or "?"

    def said(self, key: str) -> bool:
        """Whether the verdict as read has `key` (a default stands for a key it lacks; some readers
        say nothing rather than the default). A Verdict built in code says all its fields."""
        return key in self._keys if self._keys is not None else key in self._names() or key in self.extra

    @property
    def recommended(self) -> Recommendation | None:
        """The recommendation; None when the verdict has none (or something that is no record)."""
        return self.recommendation if isinstance(self.recommendation, Recommendation) else None

    @property
    def can_keep(self) -> bool:
        """The recommendation says the candidate may be kept (False without one)."""
        return bool(self.recommended is not None and self.recommended.can_keep)

    @property
    def keep_buckets(self) -> list[str]:
        """The buckets the recommendation names to keep the candidate for only (harness.evaluate.keep_policy)."""
        return self.recommended.buckets if self.recommended is not None else []

    @property
    def incumbent_commit(self) -> str | None:
        """The commit it was measured against (the loop adds it to the verdict before journalling it)."""
        return self.extra.get("incumbent_commit")

    @property
    def partial(self) -> list:
        """The shapes an accepted verdict skipped (`partial`: a run limited to some shapes)."""
        return list(self.extra.get("partial") or [])

    @property
    def shape_dicts(self) -> list[dict]:
        """The shapes in their wire form: the agents' history (harness.agents.base.Attempt.shapes)."""
        return [_encode(s) for s in self.shapes]

    @property
    def rules(self) -> list[str]:
        """The rules of its reasons, in order, without repeats."""
        return list(dict.fromkeys(str(r.rule) for r in self.reasons or [] if isinstance(r, Reason)))

    @property
    def outcome(self) -> str:
        """One word for the agent's history: accepted, rejected-static, crashed, incorrect, rejected-STAGE."""
        if self.accepted:
            return "accepted"
        if self.stage == "static":
            return "rejected-static"
        if set(self.rules) & _CRASH_RULES or self.stage == "import":
            return "crashed"
        if self.stage == "correctness":
            return "incorrect"
        return f"rejected-{self.stage or 'unknown'}"

    def tally(self, action: str) -> str:
        """Its place in the session's tally (harness.evaluate.verdict.OUTCOMES) once decided: kept;
        else why it went: rejected (a static check, a rule or a guard), incorrect, crashed (or hung),
        or reverted (correct, and not kept)."""
        if action == "keep":
            return "kept"
        outcome = self.outcome
        if outcome in ("incorrect", "crashed"):
            return outcome
        return "reverted" if outcome == "accepted" else "rejected"

    @property
    def cannot_keep_reason(self) -> str:
        """Why a candidate can never be kept, naming the stage and rule that stopped it, e.g.
        'rejected at the static check (python-syntax, line 38)'. Headless, the TUI and the loop's
        policy note all say it this way."""
        if self.partial and self.accepted:
            return f"not every shape was run (skipped: {', '.join(self.partial)})"
        stage = str(self.stage or "")
        where = _STAGE_WORDS.get(stage, stage or "an unknown stage")
        rules: list[str] = []
        for rule in self.rules:
            rule = rule.removeprefix("static:")
            if rule and rule not in rules:
                rules.append(rule)
        if stage == "static":  # locate the first violation: that is where the person looks
            lines = [v.line for v in self.violations if isinstance(v, Finding) and v.is_error]
            if rules and lines and lines[0]:
                rules[0] += f", line {lines[0]}"
        more = f" and {len(rules) - 3} more" if len(rules) > 3 else ""
        return f"rejected at {where}" + (f" ({'; '.join(rules[:3])}{more})" if rules else "")

    @classmethod
    def _decode(cls, name: str, value: Any) -> Any:
        if name in ("shapes", "heldout") and isinstance(value, list):
            return [ShapeResult.from_json(s) if isinstance(s, dict) else s for s in value]
        if name == "reasons" and isinstance(value, list):
            return [Reason.from_json(r) if isinstance(r, dict) else r for r in value]
        if name == "violations" and isinstance(value, list):
            return findings(value)
        if name == "recommendation" and isinstance(value, dict):
            return Recommendation.from_json(value)
        return value


def as_verdict(v: "dict | Verdict | None") -> Verdict:
    """A reader's verdict: a Verdict as it is, a dict (the wire form) read, None as an empty verdict
    (every field its default). Renderers that take either call this once at the top."""
    if isinstance(v, Verdict):
        return v
    return Verdict.from_json(v) if v else Verdict.empty()

"""One fold of a session's journal into what happened: its steps, decisions, keeps and bucket keeps.

The journal (harness/sessions/journal.py) is a list of records; every reader wants the same few answers from
it (which iterations started, what each candidate was, its verdict, who decided what, what is left
undecided). They are folded here, once, and read by the loop's resume, the TUI, the headless run's
resume and summary, results.tsv, `sessions show/resume`, the report, the per-bucket keeps and routing
table (harness.model.dispatch) and the pack selection a resume takes up (Session.journalled_packs).

A decision is read with the proposal and verdict known when it was journalled (`decided`, in journal
order): results.tsv and the loop's history are that view. `steps` holds the latest of each record
per iteration, including candidates still undecided.

A verdict is read here, once per EvalResult record, into its typed record (harness.evaluate.records):
every reader of the fold, and the events it hands back, read that `Verdict`; the records themselves
stay the journal's JSON objects, as written.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from harness.evaluate.records import Verdict


@dataclass
class Step:
    """One iteration's records (the journal's dicts, its verdict read; None where none was written)."""

    iteration: Any  # an int in every journal warpsmith writes; kept as written
    proposal: dict | None = None  # CandidateProposed
    meta: dict = field(default_factory=dict)  # ProposalMeta's "meta"
    verdict: Verdict | None = None  # EvalResult's "verdict", read
    decision: dict | None = None  # Decision
    bucket_keep: dict | None = None  # the last BucketKeep
    packs: list | None = None  # PromptPacks' "packs"
    reasoning: str = ""  # the Reasoning chunks, joined

    @property
    def commit(self) -> str:
        return (self.proposal or {}).get("commit", "")

    @property
    def description(self) -> str:
        return (self.proposal or {}).get("description", "")

    @property
    def action(self) -> str:
        """keep | revert | "" (undecided)."""
        return (self.decision or {}).get("action", "")


@dataclass
class SessionHistory:
    records: list[dict]
    steps: dict[Any, Step] = field(default_factory=dict)  # by iteration, in order of first record
    decided: list[Step] = field(default_factory=list)  # one per Decision, as known when it was written
    started: int = 0  # the highest IterationStarted
    proposals: list[dict] = field(default_factory=list)  # CandidateProposed records, in order
    keeps: list[dict] = field(default_factory=list)  # Decision records with action "keep", in order
    bucket_keeps: list[dict] = field(default_factory=list)  # BucketKeep records, in order
    session_started: dict = field(default_factory=dict)  # the first SessionStarted record
    # the last PacksSelected record's ids: the selection a resume takes up; None when none was journalled
    packs_selected: list[str] | None = None
    verdicts: dict[int, Verdict] = field(default_factory=dict, repr=False)  # by index in records: each read once

    @classmethod
    def fold(cls, records: Iterable[dict]) -> "SessionHistory":
        h = cls(records=list(records))
        proposed: dict[Any, dict] = {}  # the latest per iteration, for decisions
        verdicts: dict[Any, Verdict | None] = {}
        metas: dict[Any, dict] = {}
        for n, r in enumerate(h.records):
            kind, it = r.get("kind"), r.get("iteration")
            if kind == "SessionStarted" and not h.session_started:
                h.session_started = r
            elif kind == "IterationStarted":
                h.started = max(h.started, int(it or 0))
            elif kind == "BucketKeep":
                h.bucket_keeps.append(r)
            elif kind == "PacksSelected" and isinstance(r.get("packs"), list):
                h.packs_selected = [str(i) for i in r["packs"]]
            if kind not in _PER_STEP:
                continue
            s = h.steps.setdefault(it, Step(it))
            if kind == "CandidateProposed":
                s.proposal = proposed[it] = r
                h.proposals.append(r)
            elif kind == "ProposalMeta":
                s.meta = metas[it] = r.get("meta") or {}
            elif kind == "EvalResult":
                raw = r.get("verdict")  # (not an object: a record no version wrote; read as not evaluated)
                s.verdict = verdicts[it] = Verdict.from_json(raw) if isinstance(raw, dict) else None
                if s.verdict is not None:
                    h.verdicts[n] = s.verdict
            elif kind == "Decision":
                s.decision = r
                if r.get("action") == "keep":
                    h.keeps.append(r)
                h.decided.append(replace(s, proposal=proposed.get(it), verdict=verdicts.get(it),
                                         meta=metas.get(it, {})))
            elif kind == "BucketKeep":
                s.bucket_keep = r
            elif kind == "PromptPacks":
                s.packs = list(r.get("packs") or [])
            elif kind == "Reasoning":
                s.reasoning += r.get("text", "")
        return h

    @classmethod
    def of(cls, session) -> "SessionHistory":
        return cls.fold(session.journal.read())

    @property
    def last_keep(self) -> dict | None:
        return self.keeps[-1] if self.keeps else None

    def undecided(self) -> list[Step]:
        """Candidates proposed and never decided (a stop in between), by iteration."""
        decided = {s.iteration for s in self.decided}
        return [self.steps[it] for it in sorted(it for it, s in self.steps.items()
                                                if s.proposal is not None and it not in decided)]

    def events(self) -> list:
        """The records that are loop events (harness.events), as events; others (PromptPacks, ...)
        and records another version of the harness wrote that don't fit are skipped."""
        from harness import events as ev  # (the loop's events; most readers never need them)

        out = []
        for n, r in enumerate(self.records):
            if r.get("kind") in ev.EVENT_TYPES:
                if n in self.verdicts:  # (read by the fold: not read again)
                    r = {**r, "verdict": self.verdicts[n]}
                try:
                    out.append(ev.from_dict(r))
                except TypeError:  # a record from another version of the harness: skip, don't crash
                    continue
        return out


_PER_STEP = {"CandidateProposed", "ProposalMeta", "EvalResult", "Decision", "BucketKeep", "PromptPacks",
             "Reasoning"}

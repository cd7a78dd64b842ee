"""Everything the screen shows, rebuilt from the loop's events (no textual here).

Widgets render from this state, so a layout switch (wide <-> narrow) or a resumed session
re-creates the screen from it instead of from widget internals.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from harness import events as ev
from harness.evaluate.records import Finding, Verdict, findings
from harness.evaluate.verdict import OUTCOMES
from harness.guard.dsl import STATIC_CHECKS

MAX_TURNS = 6  # reasoning turns kept in memory for the screen; the journal keeps them all
TALLY_KEYS = OUTCOMES


@dataclass
class Block:
    kind: str  # reasoning | message | tool | note
    text: str
    level: str = "info"  # notes: info | warning | error | rule | decision


@dataclass
class Turn:
    iteration: int
    blocks: list[Block] = field(default_factory=list)

    def add_text(self, channel: str, text: str) -> bool:
        """Append streamed text; True when it started a new block."""
        if self.blocks and self.blocks[-1].kind == channel:
            self.blocks[-1].text += text
            return False
        self.blocks.append(Block(channel, text))
        return True


@dataclass
class CandidateView:
    iteration: int
    commit: str
    description: str
    old: str  # the incumbent's source (best at proposal time)
    new: str
    agent: str = ""
    model: str = ""
    violations: list[Finding] = field(default_factory=list)
    incumbent: str = ""  # the commit it was diffed against and measured against

    def __post_init__(self) -> None:  # given in their wire form (dicts): read once, here
        self.violations = findings(self.violations)


@dataclass
class ModelStats:
    candidates: int = 0
    dsl_breaks: int = 0  # candidates that did not launch the required DSL
    rule_breaks: int = 0  # candidates that hit a forbidden rule


def tally_key(verdict: Verdict, action: str) -> str:
    return verdict.tally(action)  # the count results.tsv's outcome column and the headless summary make


DSL_CHECKS = frozenset(STATIC_CHECKS)  # entry-defined, triton-kernel, triton-launch, cute-launch, ...


def is_dsl_violation(v: Finding) -> bool:
    """The candidate did not really launch the required DSL (vs. a forbidden-construct rule)."""
    rule = str(v.rule)
    return rule in DSL_CHECKS or "dsl" in rule.lower()


@dataclass
class RunState:
    session_id: str = ""
    task: str = ""
    agent: str = ""
    device: str = ""
    packs: list[str] = field(default_factory=list)
    mode: str = "manual"
    iteration: int = 0
    phase: str = "starting"  # starting | proposing | evaluating | deciding | ended
    call_timeout_s: float | None = None  # the per-call limit of the evaluation running now
    paused: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    turns: list[Turn] = field(default_factory=list)
    pruned_turns: int = 0
    candidate: CandidateView | None = None
    verdict: Verdict | None = None
    verdict_iteration: int = 0
    recommendation: ev.Recommendation | None = None
    verdicts: dict[int, Verdict] = field(default_factory=dict)
    tally: Counter = field(default_factory=Counter)
    best_speedup: float = 1.0
    best_history: list[float] = field(default_factory=list)
    untimed_keep: bool = False  # a keep with no timing (interpreter, override): best_speedup is not known
    ideas: list[str] = field(default_factory=list)
    model_stats: dict[str, ModelStats] = field(default_factory=dict)
    last_decision: ev.Decision | None = None
    ended: str = ""
    workers: list[dict] = field(default_factory=list)
    profile: dict | None = None  # the incumbent's bottleneck profile (GPU only)
    incumbents: dict[int, str] = field(default_factory=dict)  # iteration -> commit it was measured against
    keeps: list[ev.Decision] = field(default_factory=list)  # every keep, in order: the best's lineage
    roof: object | None = None  # harness.profiling.roofline.Roof of the session's hardware pack (set by the bench pane)

    # -- helpers ------------------------------------------------------------------------------
    def turn(self, iteration: int) -> Turn:
        if not self.turns or self.turns[-1].iteration != iteration:
            self.turns.append(Turn(iteration))
            if len(self.turns) > MAX_TURNS:
                self.pruned_turns += len(self.turns) - MAX_TURNS
                del self.turns[:-MAX_TURNS]
        return self.turns[-1]

    def note(self, iteration: int, text: str, level: str = "info") -> Block:
        block = Block("note", text, level)
        self.turn(iteration).blocks.append(block)
        return block

    @property
    def model_key(self) -> str:
        return self.agent or "agent"

    @property
    def timed(self) -> bool:
        """Some verdict of the session has timings (none on a machine without a GPU)."""
        return any(self.verdict_of(it).timing_available for it in self.verdicts)

    def verdict_of(self, iteration: int) -> Verdict:
        """The iteration's verdict (an empty one when there is none)."""
        v = self.verdicts.get(iteration)
        return v if v is not None else Verdict.empty()

    def lineage(self, incumbent: str) -> list[ev.Decision]:
        """The keeps that led to `incumbent`, oldest first (empty: the baseline, or not known)."""
        for i, d in enumerate(self.keeps):
            if d.commit and incumbent and (d.commit.startswith(incumbent) or incumbent.startswith(d.commit)):
                return self.keeps[: i + 1]
        return []

    # -- events -------------------------------------------------------------------------------
    def apply(self, e: ev.Event, old_source: str | None = None) -> set[str]:
        """Update from one event; returns the areas to redraw: reasoning, diff, bench, status."""
        if isinstance(e, ev.SessionStarted):
            self.session_id, self.task, self.agent, self.device = e.session_id, e.task, e.agent, e.device
            self.mode = e.decision_mode
            if e.packs:
                self.packs = [p.get("id", "?") for p in e.packs]
            return {"status"}
        if isinstance(e, ev.IterationStarted):
            self.iteration, self.phase = e.iteration, "proposing"
            self.turn(e.iteration)
            return {"status", "reasoning", "bench"}  # the bench's verdict is now the previous one
        if isinstance(e, ev.Reasoning):
            self.turn(e.iteration).add_text(e.channel, e.text)
            return {"reasoning"}
        if isinstance(e, ev.AgentNotice):
            self.note(e.iteration, e.message, e.level)
            return {"reasoning"}
        if isinstance(e, ev.AgentSwitched):
            self.agent = e.label
            self.note(e.iteration, f"agent switched to {e.label}")
            return {"reasoning", "status", "bench"}
        if isinstance(e, ev.HardwarePackChosen):
            self.note(0, e.reason)
            return {"reasoning"}
        if isinstance(e, ev.Usage):
            self.input_tokens += e.input_tokens
            self.output_tokens += e.output_tokens
            self.cost_usd = e.session_cost_usd or self.cost_usd + e.cost_usd
            return {"status"}
        if isinstance(e, ev.CandidateProposed):
            if e.agent:
                self.agent = f"{e.agent}:{e.model}" if e.model else e.agent
            self.candidate = CandidateView(e.iteration, e.commit, e.description,
                                           old_source if old_source is not None else "", e.source,
                                           e.agent, e.model, incumbent=e.incumbent)
            self.incumbents[e.iteration] = e.incumbent
            self.model_stats.setdefault(self.model_key, ModelStats()).candidates += 1
            self.note(e.iteration, f"candidate `{e.commit[:10]}`: {e.description}")
            return {"diff", "reasoning", "status", "bench"}
        if isinstance(e, ev.StaticResult):
            if self.candidate is not None and self.candidate.iteration == e.iteration:
                self.candidate.violations = list(e.violations)
            if e.violations:
                stats = self.model_stats.setdefault(self.model_key, ModelStats())
                if any(is_dsl_violation(v) for v in e.violations):
                    stats.dsl_breaks += 1
                if any(not is_dsl_violation(v) for v in e.violations):
                    stats.rule_breaks += 1
                for v in e.violations:
                    self.note(e.iteration, f"rule **{v.rule}** at line {v.line}: {v.message}", "rule")
            return {"diff", "reasoning", "bench"}
        if isinstance(e, ev.EvalStarted):
            self.phase, self.call_timeout_s = "evaluating", e.call_timeout_s
            return {"status", "bench"}
        if isinstance(e, ev.EvalResult):
            self.verdict, self.verdict_iteration = e.verdict, e.iteration
            self.verdicts[e.iteration] = e.verdict
            self.recommendation = None
            v = e.verdict
            if not v.accepted:
                for r in v.reasons[:6]:
                    self.note(e.iteration, f"rejected at {v.stage_shown}: **{r.rule}**: {r.message}", "rule")
            return {"bench", "reasoning", "status"}
        if isinstance(e, ev.Recommendation):
            self.recommendation = e
            return {"bench"}
        if isinstance(e, ev.DecisionNeeded):
            self.phase = "deciding"
            return {"status"}
        if isinstance(e, ev.Decision):
            self.last_decision = e
            if e.action == "keep":
                self.keeps.append(e)
            self.tally[tally_key(self.verdict_of(e.iteration), e.action)] += 1
            g = self.verdict_of(e.iteration).geomean_speedup
            if e.action == "keep" and isinstance(g, (int, float)) and g > 0:
                self.best_speedup *= g
            elif e.action == "keep":
                self.untimed_keep = True  # kept without a measured speedup: the product is unknown
            self.best_history.append(self.best_speedup)
            extra = " (override)" if e.override else ""
            self.note(e.iteration, f"decision: **{e.action}** by {e.by}{extra}"
                                   + (f": {e.reason}" if e.reason else ""), "decision")
            self.phase = "proposing"
            return {"bench", "reasoning", "status"}
        if isinstance(e, ev.IdeasChanged):
            self.ideas = list(e.ideas)
            return {"status", "bench"}
        if isinstance(e, ev.PackReloaded):
            self.note(self.iteration, f"pack {e.pack_id} reloaded" +
                      ("" if e.ok else f" FAILED, last good kept: {e.message}"), "info" if e.ok else "warning")
            return {"reasoning"}
        if isinstance(e, ev.ProfileReady):
            self.profile = dict(e.profile, incumbent=e.incumbent)
            return {"bench"}
        if isinstance(e, ev.WorkerStatus):
            self.workers = list(e.workers)
            return {"bench"}
        if isinstance(e, ev.SessionEnded):
            self.phase, self.ended = "ended", e.reason
            self.note(self.iteration, f"session ended: {e.reason}; best `{e.best[:10]}` after "
                                      f"{e.iterations} iteration{'' if e.iterations == 1 else 's'}")
            return {"status", "reasoning", "bench"}  # no "now #N" left to show
        return set()

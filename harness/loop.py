"""The autoresearch loop: propose → guard → evaluate → recommend → decide → keep/revert.

Deliberately small: the agent, the evaluator, the workspace and the journal carry the weight.
Every step emits a typed event (harness.events); the journal gets each one before the UI does,
and a decision is on disk before the workspace acts on it, so a kill at any point resumes cleanly.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from harness import events as ev
from harness.agents.base import (Agent, Attempt, Exhausted, Notice, Proposal, ProposalContext,
                                 ReasoningChunk, UsageReport)
from harness.agents.base import code_key  # noqa: F401 (lived here; callers import it from here)
from harness.evaluate.records import Recommendation
from harness.evaluate.verdict import outcome_of  # (here before; callers import it from here)
from harness.history import SessionHistory
from harness.session import Session
from harness.tasks import Task
from harness.workspace import unified_diff

EvaluateFn = Callable[[Task, Path, Path], dict]


@dataclass
class DecisionRequest:
    iteration: int
    commit: str
    description: str
    verdict: dict
    action: str  # recommended: keep | revert
    reason: str
    can_keep: bool


@dataclass
class DecisionReply:
    action: str  # keep | revert
    by: str = "human"  # human | auto
    reason: str = ""  # a veto reason, fed back to the agent
    confirmed_override: bool = False  # the person confirmed keeping against the recommendation
    buckets: list[str] = field(default_factory=list)  # revert overall, but keep for these buckets


class Decider(Protocol):
    def decide(self, request: DecisionRequest) -> DecisionReply: ...


class AutoDecider:
    """Follows the harness's recommendation (`--auto`)."""

    def decide(self, request: DecisionRequest) -> DecisionReply:
        # A recommendation may name buckets to keep the candidate for (a geomean win that slows a
        # protected shape: harness.evaluate.keep_policy); following it keeps it for those only.
        rec = Recommendation.of(request.verdict)
        buckets = rec.buckets if rec is not None else []
        return DecisionReply(request.action, by="auto", buckets=buckets if request.can_keep else [],
                             reason=f"kept for buckets {', '.join(buckets)} only, as recommended" if buckets else "")


def summarize_verdict(verdict: dict) -> str:
    parts = []
    for r in verdict.get("reasons", [])[:6]:
        parts.append(f"{r.get('rule')}: {r.get('message')}")
    for v in verdict.get("violations", [])[:6]:
        parts.append(f"line {v.get('line')}: {v.get('rule')}: {v.get('message')}")
    for s in verdict.get("shapes", []):
        if s.get("candidate_us") is not None:
            parts.append(f"{s['name']}: {s['candidate_us']:.1f} us vs {s.get('incumbent_us') or 0:.1f} us")
        elif s.get("error"):
            parts.append(f"{s['name']}: {s['error']}")
    g = verdict.get("geomean_speedup")
    if g:
        parts.append(f"geomean speedup {g:.3f}x")
    if not verdict.get("timing_available", True):
        parts.append("timing unavailable on this machine (Triton interpreter)")
    return "; ".join(parts)


class Loop:
    def __init__(self, session: Session, task: Task, agent: Agent, decider: Decider,
                 evaluate: EvaluateFn, emit: Callable[[ev.Event], None] | None = None,
                 max_iterations: int = 20,
                 prompt_builder: Callable[[ProposalContext], tuple[str, str, list[dict]]] | None = None,
                 budget: Any = None):
        self.session, self.task, self.agent, self.decider = session, task, agent, decider
        self.evaluate = evaluate
        self.emit_cb = emit or (lambda e: None)
        self.max_iterations = max_iterations
        self.prompt_builder = prompt_builder
        self.budget = budget
        self.call_timeout_s: float | None = None  # the per-call limit in force (shown while evaluating)
        self.history: list[Attempt] = []
        self.iteration = 0
        self.cancel = threading.Event()
        self.resume_gate = threading.Event()
        self.resume_gate.set()
        self.undecided: list[dict] = []  # candidates proposed before a stop, not yet decided
        self._last_packs: list[dict] | None = None
        self.closers: list[Callable[[], None]] = []  # e.g. stop the pack watcher when the run ends
        # Applied to each verdict before it is journalled (task, verdict, candidate, incumbent) -> verdict:
        # harness.wiring.e2e_gate in a run; None here, for loops built by hand (tests).
        self.check_verdict: Callable[[Task, dict, Path, Path], dict] | None = None
        self._measured: dict[tuple[str, str], int] = {}  # (code, incumbent commit) -> iteration
        self._restore()

    # -- events -------------------------------------------------------------------------------
    def emit(self, event: ev.Event, journal: bool = True) -> None:
        if journal:
            self.session.record(event.to_dict())
        self.emit_cb(event)

    # -- control from the UI (any thread) ------------------------------------------------------
    def pause(self) -> None:
        self.resume_gate.clear()

    def resume(self) -> None:
        self.resume_gate.set()

    def stop(self) -> None:
        self.cancel.set()
        self.resume_gate.set()

    def set_agent(self, agent: Agent) -> None:
        self.agent = agent
        self.emit(ev.AgentNotice(self.iteration, "info", f"agent switched to {agent.name}:{agent.model}"))

    def set_ideas(self, ideas: list[str]) -> None:
        self.session.meta.ideas = list(ideas)
        self.session.save_meta()
        self.emit(ev.IdeasChanged(list(ideas)))

    # -- resume -------------------------------------------------------------------------------
    def _restore(self) -> None:
        """Rebuild history and any undecided candidate from the journal."""
        h = SessionHistory.of(self.session)
        self.iteration = max(self.iteration, h.started)
        for r in h.proposals:
            self.remember(r.get("iteration"), r.get("source", ""), r.get("incumbent", ""))
        for st in h.decided:
            r, p, v = st.decision, st.proposal or {}, st.verdict or {}
            outcome = outcome_of(v)
            if outcome == "accepted":
                outcome = "kept" if r["action"] == "keep" else "reverted"
            self.history.append(Attempt(st.iteration, p.get("description", ""), outcome, summarize_verdict(v),
                                        r.get("reason", ""), st.meta, v.get("shapes") or []))
        last_keep = h.last_keep
        # A kill between journalling a keep and moving the ref: finish the keep now.
        ws = self.session.workspace
        from harness.dispatch import restore_bucket_refs
        restore_bucket_refs(self.session)
        if last_keep and ws.best != last_keep["commit"] and last_keep.get("best") == last_keep["commit"]:
            ws.keep(last_keep["commit"], last_keep["iteration"])
        # Every candidate proposed but not decided before the stop, in order (ParallelLoop resumes
        # them all; this loop, which has at most one in flight, resumes the last).
        self.undecided = [{"iteration": st.iteration, "proposal": st.proposal, "meta": st.meta,
                           "verdict": st.verdict} for st in h.undecided()]

    # -- code already measured ----------------------------------------------------------------
    def twin_of(self, source: str, incumbent_commit: str, incumbent_source: str) -> str | None:
        """What this code is a copy of, if it needn't run: the incumbent itself, or a candidate
        already measured against this same incumbent (against another one it is a new question).
        Agents re-propose both often; each would cost a full evaluation to learn nothing."""
        key = code_key(source)
        if key == code_key(incumbent_source):
            return "the incumbent itself"
        it = self._measured.get((key, incumbent_commit))
        return None if it is None else f"candidate {it}, already measured against this incumbent"

    def remember(self, iteration: int, source: str, incumbent_commit: str) -> None:
        self._measured.setdefault((code_key(source), incumbent_commit), iteration)

    # -- the loop -----------------------------------------------------------------------------
    def run(self) -> str:
        try:
            return self._run()
        finally:
            for close in self.closers:
                close()

    def _run(self) -> str:
        reason = "iterations done"
        if self.undecided:
            p = self.undecided.pop()
            self.undecided.clear()
            self._evaluate_and_decide(p["iteration"], p["proposal"]["commit"], p["proposal"]["description"],
                                      p["meta"], p["verdict"])
        while self.iteration < self.max_iterations:
            self.resume_gate.wait()
            if self.cancel.is_set():
                reason = "stopped"
                break
            if self.budget is not None and getattr(self.budget, "exhausted", False):
                reason = "budget reached"
                break
            self.iteration += 1
            done = self.step(self.iteration)
            if done:
                reason = done
                break
        self.emit(ev.SessionEnded(reason, self.session.workspace.best, self.iteration))
        return reason

    def step(self, it: int) -> str | None:
        """One iteration. Returns a reason to stop, or None to go on."""
        ws = self.session.workspace
        self.emit(ev.IterationStarted(it))
        incumbent_commit = ws.best
        incumbent_source = ws.source(incumbent_commit)
        ctx = ProposalContext(self.task, it, incumbent_source, incumbent_commit, list(self.history),
                              list(self.session.meta.ideas), cancel=self.cancel)
        if self.prompt_builder is not None:
            ctx.system, ctx.prompt, packs = self.prompt_builder(ctx)
            ctx.packs = packs
            if packs != self._last_packs:  # say it when the knowledge in the prompt changes
                self.emit(ev.AgentNotice(it, "info", "prompt packs: " + ", ".join(
                    f"{p['id']}@{p['version']}#{p['sha256'][:8]}" for p in packs)), journal=False)
                self._last_packs = packs
            self.session.record({"kind": "PromptPacks", "iteration": it, "packs": packs})
        proposal, stop = self.stream_proposal(it, ctx)
        if stop is not None:
            self.iteration = it - 1
            return stop
        if proposal is None:
            self.history.append(Attempt(it, "(no candidate)", "no-candidate"))
            return None
        twin = self.twin_of(proposal.source, incumbent_commit, incumbent_source)
        if twin is not None:
            self.emit(ev.AgentNotice(it, "warning", f"not evaluated: the proposal is the same code as {twin}"))
            self.history.append(Attempt(it, proposal.description, "duplicate",
                                        f"the same code as {twin}; not evaluated again"))
            return None
        commit = ws.commit_candidate(proposal.source, it, proposal.description)
        self.remember(it, proposal.source, incumbent_commit)
        self.emit(ev.CandidateProposed(it, commit, proposal.description,
                                       unified_diff(incumbent_source, proposal.source), proposal.source,
                                       self.agent.name, self.agent.model, incumbent_commit))
        # meta (e.g. the tuner's config) must survive a resume: journal it beside the proposal.
        self.session.record({"kind": "ProposalMeta", "iteration": it, "meta": proposal.meta})
        self._evaluate_and_decide(it, commit, proposal.description, proposal.meta, None)
        return None

    def stream_proposal(self, it: int, ctx: ProposalContext) -> tuple[Proposal | None, str | None]:
        """Run one propose() stream into events. Returns (proposal or None, reason to stop or None).

        Streamed chunks go to the screen only; the journal gets the whole reasoning text once.
        """
        proposal, reasoning, stop = None, [], None
        for item in self.agent.propose(ctx):
            if isinstance(item, ReasoningChunk):
                reasoning.append(item.text)
                self.emit(ev.Reasoning(it, item.text, item.channel), journal=False)
            elif isinstance(item, UsageReport):
                self.emit(ev.Usage(it, item.input_tokens, item.output_tokens, item.cached_tokens,
                                   item.reasoning_tokens, item.cost_usd,
                                   getattr(self.budget, "spent_usd", 0.0) or 0.0))
            elif isinstance(item, Notice):
                self.emit(ev.AgentNotice(it, item.level, item.message))
            elif isinstance(item, Proposal):
                proposal = item
            elif isinstance(item, Exhausted):
                self.emit(ev.AgentNotice(it, "error" if item.fatal else "info", item.reason))
                stop = item.reason
                break
            if self.cancel.is_set():
                stop = "stopped"
                break
        if reasoning:
            self.session.record(ev.Reasoning(it, "".join(reasoning)).to_dict())
        return (None if stop else proposal), stop

    def _evaluate_and_decide(self, it: int, commit: str, description: str, meta: dict,
                             verdict: dict | None) -> None:
        ws = self.session.workspace
        if verdict is None:
            cand_path = ws.write_candidate_file(commit, self.session.work / f"candidate_{it:04d}.py")
            inc_path = ws.write_candidate_file(ws.best, self.session.work / f"incumbent_{it:04d}.py")
            self.emit(ev.EvalStarted(it, call_timeout_s=self.call_timeout_s))
            verdict = self.evaluate(self.task, cand_path, inc_path)
            if self.check_verdict is not None:
                verdict = self.check_verdict(self.task, verdict, cand_path, inc_path)
            self.emit(ev.StaticResult(it, not verdict.get("violations"), verdict.get("violations", [])))
            self.emit(ev.EvalResult(it, verdict))
        rec = Recommendation.of(verdict) or Recommendation("revert", "no recommendation", False)
        self.emit(ev.Recommendation(it, rec.action, rec.reason, bool(rec.can_keep)))
        request = DecisionRequest(it, commit, description, verdict, rec.action, rec.reason, bool(rec.can_keep))
        if request.can_keep:
            self.emit(ev.DecisionNeeded(it))
            reply = self.decider.decide(request)
        else:  # failed correctness, a guard or a rule: there is nothing to ask, the harness reverts it
            reply = DecisionReply("revert", "harness")
        action, by, override = reply.action, reply.by, False
        if action == "keep" and request.action != "keep":
            override = True
        best_after = commit if action == "keep" else ws.best
        # On disk before the workspace moves: a kill right here replays the decision, not the question.
        self.emit(ev.Decision(it, action, by, override, reply.reason, commit, best_after))
        if action == "keep":
            ws.keep(commit, it)
        elif getattr(reply, "buckets", None) and request.can_keep:
            from harness.dispatch import keep_for_buckets  # per-bucket keep: best stays, refs/buckets/* move
            keep_for_buckets(self.session, it, commit, reply.buckets, self.task, verdict, by=by, reason=reply.reason)
        outcome = outcome_of(verdict)
        if outcome == "accepted":
            outcome = "kept" if action == "keep" else "reverted"
        self.history.append(Attempt(it, description, outcome, summarize_verdict(verdict), reply.reason, meta or {},
                                    verdict.get("shapes") or []))

"""ParallelLoop: several candidates in flight, decisions still one at a time and in order.

`--proposals N` proposer threads ask the agent for candidates (an agent's propose() is a plain
generator, safe to run in several threads); each candidate is committed and submitted to an
Evaluator backend (local / pool / ray) as soon as it arrives; verdicts come back in any order and
are journalled as they arrive; the person (or the policy) decides in iteration order.

What keeps a verdict honest when several are in flight:
- each candidate's commit has the incumbent it is measured against as its parent, and that
  commit is journalled (CandidateProposed.incumbent, verdict["incumbent_commit"]);
- a keepable candidate measured against an incumbent that has since been replaced is committed
  again on top of the new best and re-measured before the decision is asked;
- in-flight candidates appear in the history the agent sees (outcome "in-flight"), and a proposal
  identical to one already in flight against the same incumbent is asked again (a few times, then
  the iteration is skipped), so two proposer threads never spend a GPU on the same code.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable

from harness import events as ev
from harness.agents.base import (Agent, Attempt, Proposal, ProposalContext)
from harness.evaluate.backends import EvalJob, WorkerSet, evaluate_fn, options_dict
from harness.evaluate.records import Recommendation
from harness.loop import Decider, Loop, code_key
from harness.session import Session
from harness.tasks import Task
from harness.workspace import unified_diff

_DUPLICATE_RETRIES = 5


@dataclass
class InFlight:
    """One iteration between IterationStarted and its Decision."""

    iteration: int
    state: str = "proposing"  # proposing | evaluating | ready | no-candidate | void
    commit: str = ""
    description: str = ""
    meta: dict = field(default_factory=dict)
    source: str = ""
    incumbent_commit: str = ""
    incumbent_source: str = ""
    future: Future | None = None
    verdict: dict | None = None
    files: tuple = ()  # (candidate, incumbent) as written for its evaluation

    @property
    def resolved(self) -> bool:
        return self.state in ("ready", "no-candidate", "void")


class ParallelLoop(Loop):
    def __init__(self, session: Session, task: Task, agent: Agent, decider: Decider, evaluator: WorkerSet,
                 emit: Callable[[ev.Event], None] | None = None, max_iterations: int = 20,
                 prompt_builder: Callable[[ProposalContext], tuple[str, str, list[dict]]] | None = None,
                 budget: Any = None, proposals: int = 2, options: Any = None, max_in_flight: int | None = None,
                 close_evaluator: bool = True):
        self.evaluator = evaluator
        self.proposals = max(1, int(proposals))
        self.options = options
        self._slots: dict[int, InFlight] = {}
        self._cv = threading.Condition()
        self._prompt_lock = threading.Lock()  # prompt builders read shared pack state
        self._stop_reason: str | None = None
        self._seen: list[Attempt] = []  # duplicates asked again: the agent must see them as taken
        super().__init__(session, task, agent, decider, evaluate_fn(evaluator, options), emit=emit,
                         max_iterations=max_iterations, prompt_builder=prompt_builder, budget=budget)
        # Enough to keep every worker busy and every proposer working, no more: a slow human
        # decision must not let proposals pile up against an incumbent that may change.
        self.max_in_flight = max_in_flight or (self.proposals + evaluator.capacity())
        if close_evaluator:
            self.closers.append(evaluator.close)
        evaluator.add_listener(lambda views: self.emit(ev.WorkerStatus(views), journal=False))

    # -- resume: every undecided candidate, not only the last ----------------------------------
    def _restore(self) -> None:
        super()._restore()
        for r in self.undecided:
            v = r["verdict"]
            if v is not None and v.get("incumbent_commit") not in (None, r["proposal"].get("incumbent")):
                r["verdict"] = None  # measured against an older incumbent than the one on record: measure again

    # -- the loop -----------------------------------------------------------------------------
    def _run(self) -> str:
        self.emit(ev.WorkerStatus(self.evaluator.workers()), journal=False)
        for r in self.undecided:
            self._resume_slot(r)
        self.undecided = []
        threads = [threading.Thread(target=self._proposer, name=f"warpsmith-proposer-{i}", daemon=True)
                   for i in range(self.proposals)]
        for t in threads:
            t.start()
        reason = self._decide_in_order(threads)
        self.cancel.set()  # proposers still asking stop now; their iterations stay undecided (resumable)
        with self._cv:
            self._cv.notify_all()
        for t in threads:
            t.join(timeout=5)
        self.emit(ev.SessionEnded(reason, self.session.workspace.best, self.iteration))
        return reason

    def _decide_in_order(self, proposers: list[threading.Thread]) -> str:
        while True:
            with self._cv:
                while True:
                    if self.cancel.is_set():
                        return self._stop_reason or "stopped"
                    undecided = sorted(self._slots)
                    if undecided and self._slots[undecided[0]].resolved:
                        slot = self._slots[undecided[0]]
                        break
                    if not undecided and not any(t.is_alive() for t in proposers):
                        return self._stop_reason or ("budget reached" if self._budget_out() else "iterations done")
                    self._cv.wait(timeout=0.5)
            self._decide(slot)
            with self._cv:
                self._slots.pop(slot.iteration, None)
                self._cv.notify_all()

    def _decide(self, slot: InFlight) -> None:
        it = slot.iteration
        if slot.state == "void":
            return
        if slot.state == "no-candidate":
            self.history.append(Attempt(it, "(no candidate)", "no-candidate"))
            return
        verdict = slot.verdict or {}
        rec = Recommendation.of(verdict)
        ws = self.session.workspace
        if rec is not None and rec.can_keep and slot.incumbent_commit != ws.best:
            # Only this thread keeps, so best can't move again before this decision.
            self.emit(ev.AgentNotice(it, "info", f"candidate {it} was measured against {slot.incumbent_commit[:10]}; "
                                                 f"the best is now {ws.best[:10]}: measuring it again"))
            self._commit_and_submit(slot)
            with self._cv:
                while slot.state != "ready":
                    self._cv.wait(timeout=0.5)
            verdict = slot.verdict or {}
        self._evaluate_and_decide(it, slot.commit, slot.description, slot.meta, verdict)

    # -- proposing ------------------------------------------------------------------------------
    def _budget_out(self) -> bool:
        return self.budget is not None and bool(getattr(self.budget, "exhausted", False))

    def _proposer(self) -> None:
        while True:
            self.resume_gate.wait()
            with self._cv:
                while len(self._slots) >= self.max_in_flight and not self.cancel.is_set():
                    self._cv.wait(timeout=0.5)
                if (self.cancel.is_set() or self._stop_reason or self._budget_out()
                        or self.iteration >= self.max_iterations):
                    self._cv.notify_all()
                    return
                self.iteration += 1
                slot = InFlight(self.iteration)
                self._slots[slot.iteration] = slot
            try:
                self._propose(slot)
            except Exception as e:  # an agent or git failure: say so, end this iteration, go on
                self.emit(ev.AgentNotice(slot.iteration, "error", f"proposal failed: {type(e).__name__}: {e}"))
                if slot.state == "proposing":
                    slot.state = "no-candidate"
            with self._cv:
                self._cv.notify_all()

    def _history_view(self) -> list[Attempt]:
        with self._cv:
            flying = [Attempt(s.iteration, s.description, "in-flight", meta=dict(s.meta))
                      for s in sorted(self._slots.values(), key=lambda s: s.iteration) if s.source]
        return list(self.history) + list(self._seen) + flying

    def _claim(self, slot: InFlight, proposal: Proposal, incumbent: str) -> int | None:
        """Take this proposal for the slot, unless the same code is already in flight (then return
        that iteration). Atomic, so two proposers can't both take it. Whatever incumbent the twin
        was measured against: one measured against a replaced incumbent is measured again before
        its decision, so a second copy would only run the same candidate twice."""
        key = code_key(proposal.source)  # the same notion of "same code" as for decided candidates
        with self._cv:
            for s in self._slots.values():
                if s is not slot and s.source and code_key(s.source) == key:
                    return s.iteration
            slot.description, slot.meta, slot.source = proposal.description, dict(proposal.meta), proposal.source
            slot.incumbent_commit = incumbent
        return None

    def _propose(self, slot: InFlight) -> None:
        it = slot.iteration
        ws = self.session.workspace
        self.emit(ev.IterationStarted(it))
        for _ in range(_DUPLICATE_RETRIES):
            incumbent = ws.best
            incumbent_source = ws.source(incumbent)
            ctx = ProposalContext(self.task, it, incumbent_source, incumbent, self._history_view(),
                                  list(self.session.meta.ideas), cancel=self.cancel)
            if self.prompt_builder is not None:
                with self._prompt_lock:
                    ctx.system, ctx.prompt, packs = self.prompt_builder(ctx)
                ctx.packs = packs
                self.emit(ev.AgentNotice(it, "info", "prompt packs: " + ", ".join(
                    f"{p['id']}@{p['version']}#{p['sha256'][:8]}" for p in packs)), journal=False)
                self.session.record({"kind": "PromptPacks", "iteration": it, "packs": packs})
            proposal = self._ask_agent(slot, ctx)
            if proposal is None:
                return
            twin = self.twin_of(proposal.source, incumbent, incumbent_source)
            dup = None if twin is not None else self._claim(slot, proposal, incumbent)
            if twin is None and dup is None:
                break
            self._seen.append(Attempt(it, proposal.description, "duplicate", meta=dict(proposal.meta)))
            self.emit(ev.AgentNotice(it, "info", f"the proposal is the same code as "
                                                 f"{twin or f'candidate {dup} (already in flight)'}; asking again"))
        else:
            # Never the same code twice in flight: this iteration ends without a candidate.
            self.emit(ev.AgentNotice(it, "warning", f"{_DUPLICATE_RETRIES} proposals in a row repeated a candidate in "
                                                    "flight or already measured; this iteration is skipped"))
            slot.state = "no-candidate"
            return
        self._commit_and_submit(slot)

    def _ask_agent(self, slot: InFlight, ctx: ProposalContext) -> Proposal | None:
        """Stream one proposal from the agent; None when it gave none (slot state says why)."""
        it = slot.iteration
        proposal, stop = self.stream_proposal(it, ctx)
        if stop is not None:
            if stop != "stopped":
                with self._cv:
                    self._stop_reason = self._stop_reason or stop
            slot.state = "void"
            return None
        if proposal is None:
            slot.state = "no-candidate"
        return proposal

    # -- evaluating -------------------------------------------------------------------------------
    def _commit_and_submit(self, slot: InFlight) -> None:
        """Commit on top of the current best (its parent is the incumbent it is measured against), submit."""
        ws = self.session.workspace
        it = slot.iteration
        slot.commit = ws.commit_candidate(slot.source, it, slot.description)
        # The parent, not a second read of best: a keep between two reads can't mislabel the incumbent.
        slot.incumbent_commit = ws.git("rev-parse", f"{slot.commit}^")
        slot.incumbent_source = ws.source(slot.incumbent_commit)
        self.remember(it, slot.source, slot.incumbent_commit)
        agent = self.agent
        self.emit(ev.CandidateProposed(it, slot.commit, slot.description,
                                       unified_diff(slot.incumbent_source, slot.source), slot.source,
                                       agent.name, agent.model, slot.incumbent_commit))
        self.session.record({"kind": "ProposalMeta", "iteration": it, "meta": slot.meta})
        self._submit(slot)

    def _submit(self, slot: InFlight) -> None:
        ws = self.session.workspace
        it = slot.iteration
        cand_path = ws.write_candidate_file(slot.commit, self.session.work / f"candidate_{it:04d}.py")
        inc_path = self.session.work / f"incumbent_{it:04d}.py"
        inc_path.write_text(slot.incumbent_source)
        slot.files = (cand_path, inc_path)
        job = EvalJob(self.task.name, str(self.task.root), slot.source, slot.incumbent_source, it,
                      options_dict(self.options), str(cand_path), str(inc_path))
        slot.state = "evaluating"
        self.emit(ev.EvalStarted(it, self.evaluator.name, call_timeout_s=self.call_timeout_s))
        fut = self.evaluator.submit(job)
        slot.future = fut
        incumbent = slot.incumbent_commit
        fut.add_done_callback(lambda f, s=slot, inc=incumbent: self._arrived(s, f, inc))

    def _arrived(self, slot: InFlight, fut: Future, incumbent: str) -> None:
        """A verdict came back (any order, from a backend thread): journal it now, decide later."""
        with self._cv:
            if slot.incumbent_commit != incumbent or slot.state != "evaluating":
                return  # a re-measurement replaced this job, or it was recorded already
            verdict = dict(fut.result())
            verdict["incumbent_commit"] = incumbent
            slot.verdict = verdict
        if self.check_verdict is not None and slot.files:  # (outside the lock: the e2e check takes a while)
            verdict = slot.verdict = self.check_verdict(self.task, verdict, *slot.files)
        self.emit(ev.StaticResult(slot.iteration, not verdict.get("violations"), verdict.get("violations", [])))
        self.emit(ev.EvalResult(slot.iteration, verdict))
        with self._cv:
            slot.state = "ready"
            self._cv.notify_all()

    def _resume_slot(self, r: dict) -> None:
        """An undecided candidate from before a kill: decide it, measuring it first if needed."""
        it, p = r["iteration"], r["proposal"]
        ws = self.session.workspace
        slot = InFlight(it, commit=p["commit"], description=p.get("description", ""), meta=r["meta"],
                        source=p.get("source") or ws.source(p["commit"]),
                        incumbent_commit=p.get("incumbent") or ws.best)
        slot.incumbent_source = ws.source(slot.incumbent_commit)
        with self._cv:
            self._slots[it] = slot
        if r["verdict"] is not None:
            slot.verdict, slot.state = r["verdict"], "ready"
        elif slot.incumbent_commit == ws.best:
            self._submit(slot)
        else:
            self._commit_and_submit(slot)

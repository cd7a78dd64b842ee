"""The autoresearch loop: propose → guard → evaluate → recommend → decide → keep/revert.

Deliberately small: the agent, the evaluator backend, the workspace and the journal carry the weight;
harness/sessions/inflight.py holds the candidates between their start and their decision. One loop for one
candidate in flight (the default: propose, evaluate, decide, then the next) and for several
(`--proposals N`, a pool of GPUs, a Ray cluster): with one in flight, it is the sequence.
Every step emits a typed event (harness.events); the journal gets each one before the UI does,
and a decision is on disk before the workspace acts on it, so a kill at any point resumes cleanly.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

from harness import events as ev
from harness.agents.base import (Agent, Attempt, Exhausted, Notice, Proposal, ProposalContext,
                                 ReasoningChunk, UsageReport)
from harness.agents.base import code_key  # noqa: F401 (lived here; callers import it from here)
from harness.decision import AutoDecider, Decider, DecisionReply, DecisionRequest  # noqa: F401 (callers import them from here)
from harness.decision import veto_reason_of
from harness.model.dispatch import keep_for_buckets, restore_bucket_refs
from harness.evaluate.backends import EvalJob, Evaluator, LocalEvaluator, calling, options_dict
from harness.evaluate.records import Recommendation, Verdict
from harness.evaluate.verdict import outcome_of  # noqa: F401 (here before; callers import it from here)
from harness.sessions.history import SessionHistory
from harness.sessions.inflight import Flight, InFlight
from harness.sessions.session import Session
from harness.authoring.tasks import Task
from harness.sessions.workspace import unified_diff

EvaluateFn = Callable[[Task, Path, Path], dict]


def summarize_verdict(v: Verdict) -> str:
    """The verdict in a line of the agent's history: reasons, rule hits with lines, per-shape times."""
    parts = [f"{r.rule}: {r.message}" for r in v.reasons[:6]]
    parts += [f"line {x.line}: {x.rule}: {x.message}" for x in v.violations[:6]]
    for s in v.shapes:
        if s.candidate_us is not None:
            parts.append(f"{s.name}: {s.candidate_us:.1f} us vs {s.incumbent_us or 0:.1f} us")
        elif s.error:
            parts.append(f"{s.name}: {s.error}")
    if v.geomean_speedup:
        parts.append(f"geomean speedup {v.geomean_speedup:.3f}x")
    if v.said("timing_available") and not v.timing_available:  # (a verdict without the key says nothing)
        parts.append("timing unavailable on this machine (Triton interpreter)")
    return "; ".join(parts)


_ASK_AGAIN = 5  # a proposal that repeats a candidate in flight is asked again this many times


def in_flight_limit(proposals: int, workers: int) -> int:
    """How many iterations may be between IterationStarted and Decision. Enough to keep every worker
    busy and every proposer working, no more: a slow decision must not let proposals pile up against
    an incumbent that may change. One proposer and one worker: one, so the agent hears every decision
    before it proposes again (the loop then runs as a plain sequence of steps)."""
    return 1 if proposals == 1 and workers == 1 else proposals + workers


class Loop:
    """propose → guard → evaluate → recommend → decide → keep/revert, for one candidate in flight or several.

    `proposals` proposer threads ask the agent (an agent's propose() is a plain generator, safe in
    several threads); each candidate is committed on top of the incumbent it is measured against and
    submitted to the evaluator backend (harness.evaluate.backends: local, pool, ray); verdicts are
    journalled as they arrive, in any order; this thread decides in iteration order. With one
    proposer and one worker a single iteration is in flight: propose, evaluate, decide, then the next.

    What keeps a verdict honest with several in flight:
    - a candidate's commit has its incumbent as parent, journalled (CandidateProposed.incumbent,
      Verdict.incumbent_commit); a keepable one whose incumbent has been replaced since is
      committed again on top of the new best and measured again before the decision is asked;
    - the agent sees the candidates in flight in its history (outcome "in-flight"); a proposal that
      repeats one in flight is asked again (then the iteration is skipped), one that repeats code
      already measured against this incumbent ends its iteration as a "duplicate", not evaluated.
    """

    def __init__(self, session: Session, task: Task, agent: Agent, decider: Decider,
                 evaluator: Evaluator | EvaluateFn, emit: Callable[[ev.Event], None] | None = None,
                 max_iterations: int = 20,
                 prompt_builder: Callable[[ProposalContext], tuple[str, str, list[dict]]] | None = None,
                 budget: Any = None, proposals: int = 1, options: Any = None, max_in_flight: int | None = None,
                 announced_packs: list[dict] | None = None):
        self.session, self.task, self.agent, self.decider = session, task, agent, decider
        if not hasattr(evaluator, "submit"):  # a plain evaluate(task, candidate, incumbent): tests, tui.testing
            evaluator = LocalEvaluator(calling(evaluator, task))
        self.evaluator = evaluator
        self.options = options  # EvalOptions for each job (or a function returning them: see options_dict)
        self.proposals = max(1, int(proposals))
        self.max_in_flight = max_in_flight or in_flight_limit(self.proposals, evaluator.capacity())
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
        self.flight = Flight()
        self.undecided: list[dict] = []  # candidates proposed before a stop, not yet decided
        # The packs of the last prompt (provenance), said when they change; `announced_packs`: the ones
        # already said before the first prompt (wiring: SessionStarted names them).
        self._last_packs: list[dict] | None = announced_packs
        self._prompt_lock = threading.Lock()  # prompt builders read shared pack state
        self._stop_reason: str | None = None  # why no more iterations start (the first reason wins)
        self._ended = False
        self.closers: list[Callable[[], None]] = [evaluator.close]  # e.g. the pack watcher's stop, from wiring
        # Applied to each verdict before it is journalled (task, verdict, candidate, incumbent) -> verdict:
        # harness.wiring.e2e_gate in a run; None here, for loops built by hand (tests).
        self.check_verdict: Callable[[Task, Verdict, Path, Path], Verdict] | None = None
        self._measured: dict[tuple[str, str], int] = {}  # (code, incumbent commit) -> iteration
        if evaluator.name != "local":  # where the work runs is worth a line only when it isn't here
            evaluator.add_listener(lambda views: self.emit(ev.WorkerStatus(views), journal=False))
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
        self.flight.notify()

    def stop(self) -> None:
        self.cancel.set()
        self.resume_gate.set()
        self.flight.notify()

    def set_agent(self, agent: Agent) -> None:
        self.agent = agent
        self.emit(ev.AgentSwitched(self.iteration, agent.name, agent.model or ""))

    def set_ideas(self, ideas: list[str]) -> None:
        self.session.set_ideas(ideas)  # (journals IdeasChanged)
        self.emit(ev.IdeasChanged(list(ideas)), journal=False)

    # -- resume -------------------------------------------------------------------------------
    def _restore(self) -> None:
        """Rebuild history and every undecided candidate from the journal."""
        h = SessionHistory.of(self.session)
        self.iteration = max(self.iteration, h.started)
        for r in h.proposals:
            self.remember(r.get("iteration"), r.get("source", ""), r.get("incumbent", ""))
        for st in h.decided:
            r, p, v = st.decision, st.proposal or {}, st.verdict or Verdict.empty()
            outcome = v.outcome
            if outcome == "accepted":
                outcome = "kept" if r["action"] == "keep" else "reverted"
            bucket_kept = any(bk.get("iteration") == st.iteration for bk in h.bucket_keeps)
            self.history.append(Attempt(st.iteration, p.get("description", ""), outcome, summarize_verdict(v),
                                        veto_reason_of(r.get("by", "human"), r.get("reason", ""), bucket_kept),
                                        st.meta, v.shape_dicts))
        last_keep = h.last_keep
        # A kill between journalling a keep and moving the ref: finish the keep now.
        ws = self.session.workspace
        restore_bucket_refs(self.session)
        if last_keep and ws.best != last_keep["commit"] and last_keep.get("best") == last_keep["commit"]:
            ws.keep(last_keep["commit"], last_keep["iteration"])
        self.undecided = []
        for st in h.undecided():
            v = st.verdict
            if v is not None and v.incumbent_commit not in (None, (st.proposal or {}).get("incumbent")):
                v = None  # measured against an older incumbent than the one on record: measure again
            self.undecided.append({"iteration": st.iteration, "proposal": st.proposal, "meta": st.meta, "verdict": v})

    def _resume(self, r: dict) -> None:
        """An undecided candidate from before a stop: decided first, measured first if needed."""
        p, ws = r["proposal"], self.session.workspace
        slot = InFlight(r["iteration"], commit=p["commit"], description=p.get("description", ""), meta=r["meta"],
                        source=p.get("source") or ws.source(p["commit"]), agent=self.agent,
                        incumbent_commit=p.get("incumbent") or ws.best)
        slot.incumbent_source = ws.source(slot.incumbent_commit)
        if r["verdict"] is not None:
            slot.verdict, slot.state = r["verdict"], "ready"
        self.flight.add(slot)
        if slot.verdict is not None:
            return
        if slot.incumbent_commit == ws.best:
            self._submit(slot)
        else:  # its incumbent was replaced since it was proposed: commit it again on the best
            self._commit_and_submit(slot)

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

    # -- the loop: this thread decides, in iteration order --------------------------------------
    def run(self) -> str:
        try:
            reason = self._run()
            self.emit(ev.SessionEnded(reason, self.session.workspace.best, self.iteration))
            return reason
        finally:
            for close in self.closers:
                close()

    def _run(self) -> str:
        proposers: list[threading.Thread] = []
        try:
            if self.evaluator.name != "local":
                self.emit(ev.WorkerStatus(self.evaluator.workers()), journal=False)
            for r in self.undecided:
                self._resume(r)
            self.undecided = []
            proposers = [threading.Thread(target=self._proposer, name=f"warpsmith-proposer-{i}", daemon=True)
                         for i in range(self.proposals)]
            for t in proposers:
                t.start()
            return self._decide_in_order(proposers)
        finally:  # (also on a decider's exception: a kill, a quit with a question open)
            self.cancel.set()  # proposers still asking stop now; their iterations stay undecided (resumable)
            self.flight.notify()
            for t in proposers:
                t.join(timeout=5)
            self._ended = True  # a verdict that lands after this (a closed backend's) is not journalled

    def _decide_in_order(self, proposers: list[threading.Thread]) -> str:
        while True:
            with self.flight.cv:
                while True:
                    if self.cancel.is_set():
                        return self._stop_reason or "stopped"
                    slot = self.flight.first()
                    if slot is not None and slot.resolved:
                        break
                    # (no slot and a reason to stop: no proposer can open another)
                    if slot is None and (self._stop_reason or not any(t.is_alive() for t in proposers)):
                        return self._stop_reason or "iterations done"
                    self.flight.cv.wait(timeout=0.5)
            if self._decide(slot):
                self.flight.remove(slot)

    def _decide(self, slot: InFlight) -> bool:
        """Decide one resolved slot; False when it was sent to be measured again first."""
        it, ws = slot.iteration, self.session.workspace
        if slot.error is not None:  # a proposer's or the verdict check's failure, in its turn
            raise slot.error
        if slot.state == "no-candidate":
            self.history.append(Attempt(it, "(no candidate)", "no-candidate"))
        elif slot.state == "duplicate":
            self.history.append(Attempt(it, slot.description, "duplicate",
                                        f"the same code as {slot.twin}; not evaluated again", meta=slot.meta))
        elif slot.state == "ready":
            verdict = slot.verdict or Verdict.empty()
            rec = verdict.recommended or Recommendation("revert", "no recommendation", False)
            if rec.can_keep and slot.incumbent_commit != ws.best:
                # Only this thread keeps, so best can't move again before this decision.
                self.emit(ev.AgentNotice(it, "info", f"candidate {it} was measured against "
                                                     f"{slot.incumbent_commit[:10]}; the best is now {ws.best[:10]}: "
                                                     "measuring it again"))
                self._commit_and_submit(slot)
                return False
            self._conclude(slot, verdict, rec)
        return True  # (void: the agent stopped or was stopped; nothing to decide)

    def _conclude(self, slot: InFlight, verdict: Verdict, rec: Recommendation) -> None:
        it, ws, commit = slot.iteration, self.session.workspace, slot.commit
        self.emit(ev.Recommendation(it, rec.action, rec.reason, bool(rec.can_keep)))
        request = DecisionRequest(it, commit, slot.description, verdict, rec.action, rec.reason, bool(rec.can_keep))
        if request.can_keep:
            self.emit(ev.DecisionNeeded(it))
            reply = self.decider.decide(request)
        else:  # failed correctness, a guard or a rule: there is nothing to ask, the harness reverts it
            reply = DecisionReply("revert", "harness")
        action, by = reply.action, reply.by
        override = action == "keep" and request.action != "keep"
        best_after = commit if action == "keep" else ws.best
        # On disk before the workspace moves: a kill right here replays the decision, not the question.
        self.emit(ev.Decision(it, action, by, override, reply.reason, commit, best_after))
        if action == "keep":
            ws.keep(commit, it)
        elif getattr(reply, "buckets", None) and request.can_keep:
            # per-bucket keep: best stays, refs/buckets/* move
            keep_for_buckets(self.session, it, commit, reply.buckets, self.task, verdict, by=by, reason=reply.reason)
        outcome = verdict.outcome
        if outcome == "accepted":
            outcome = "kept" if action == "keep" else "reverted"
        bucket_kept = bool(getattr(reply, "buckets", None) and request.can_keep and action != "keep")
        self.history.append(Attempt(it, slot.description, outcome, summarize_verdict(verdict),
                                    veto_reason_of(by, reply.reason, bucket_kept), slot.meta or {},
                                    verdict.shape_dicts))

    # -- proposing: `proposals` threads ----------------------------------------------------------
    def _budget_out(self) -> bool:
        return self.budget is not None and bool(getattr(self.budget, "exhausted", False))

    def _stop_starting(self, reason: str) -> None:
        """No more iterations start; the first reason given is the run's."""
        with self.flight.cv:  # (a Condition's lock is reentrant: callers may hold it)
            self._stop_reason = self._stop_reason or reason
            self.flight.cv.notify_all()

    def _next_slot(self) -> InFlight | None:
        """The next iteration, once there is room for it and the run isn't paused; None: no more."""
        with self.flight.cv:
            while True:
                if self.cancel.is_set() or self._stop_reason:
                    return None
                if self.iteration >= self.max_iterations:
                    self._stop_starting("iterations done")
                    return None
                if self.resume_gate.is_set() and len(self.flight) < self.max_in_flight:
                    break
                self.flight.cv.wait(timeout=0.5)
            if self._budget_out():
                self._stop_starting("budget reached")
                return None
            self.iteration += 1
            return self.flight.add(InFlight(self.iteration, agent=self.agent))

    def _proposer(self) -> None:
        while (slot := self._next_slot()) is not None:
            try:
                self._propose(slot)
            except Exception as e:  # an agent or git failure ends the run when its turn comes, as it would in order
                slot.error = e
                self.flight.set(slot, "failed")

    def _propose(self, slot: InFlight) -> None:
        it, ws = slot.iteration, self.session.workspace
        self.emit(ev.IterationStarted(it))
        for _ in range(_ASK_AGAIN):
            incumbent = ws.best
            incumbent_source = ws.source(incumbent)
            ctx = ProposalContext(self.task, it, incumbent_source, incumbent,
                                  list(self.history) + self.flight.attempts(), list(self.session.meta.ideas),
                                  cancel=self.cancel)
            self._build_prompt(ctx)
            slot.agent = self.agent
            proposal, stop = self.stream_proposal(it, ctx, slot.agent)
            if stop is not None:
                with self.flight.cv:
                    if stop != "stopped":
                        self._stop_starting(stop)
                    if self.iteration == it:
                        self.iteration = it - 1  # it proposed nothing: not counted
                self.flight.set(slot, "void")
                return
            if proposal is None:
                self.flight.set(slot, "no-candidate")
                return
            flying = self._claim(slot, proposal, incumbent, incumbent_source)
            if flying is None:
                break
            self.emit(ev.AgentNotice(it, "info", f"the proposal is the same code as candidate {flying} "
                                                 "(in flight); asking again"))
        else:
            self.emit(ev.AgentNotice(it, "warning", f"{_ASK_AGAIN} proposals in a row repeated a candidate in "
                                                    "flight; this iteration is skipped"))
            self.flight.set(slot, "no-candidate")
            return
        if slot.twin:
            self.emit(ev.AgentNotice(it, "warning", f"not evaluated: the proposal is the same code as {slot.twin}"))
            self.flight.set(slot, "duplicate")
            return
        self._commit_and_submit(slot)

    def _build_prompt(self, ctx: ProposalContext) -> None:
        if self.prompt_builder is None:
            return
        with self._prompt_lock:
            ctx.system, ctx.prompt, packs = self.prompt_builder(ctx)
            changed, self._last_packs = packs != self._last_packs, packs
        ctx.packs = packs
        if changed:  # say it when the knowledge in the prompt changes
            self.emit(ev.AgentNotice(ctx.iteration, "info", "prompt packs: " + ", ".join(
                f"{p['id']}@{p['version']}#{p['sha256'][:8]}" for p in packs)), journal=False)
        self.session.record(ev.PromptPacks(ctx.iteration, packs).to_json())

    def _claim(self, slot: InFlight, proposal: Proposal, incumbent: str, incumbent_source: str) -> int | None:
        """Take this proposal for the slot; or mark it a duplicate of code already measured (slot.twin);
        or, if the same code is in flight, return that iteration and take nothing. Atomic, so two
        proposers can't both take the same code."""
        with self.flight.cv:
            flying = self.flight.twin(slot, proposal.source)  # first: a racing proposer couldn't know
            if flying is not None:
                return flying
            twin = self.twin_of(proposal.source, incumbent, incumbent_source)
            slot.description, slot.meta, slot.twin = proposal.description, dict(proposal.meta), twin or ""
            if twin is None:
                slot.source, slot.incumbent_commit = proposal.source, incumbent
        return None

    def stream_proposal(self, it: int, ctx: ProposalContext, agent: Agent | None = None
                        ) -> tuple[Proposal | None, str | None]:
        """Run one propose() stream into events. Returns (proposal or None, reason to stop or None).

        Streamed chunks go to the screen only; the journal gets the whole reasoning text once.
        """
        proposal, reasoning, stop = None, [], None
        for item in (agent or self.agent).propose(ctx):
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

    # -- evaluating: the backend's threads -------------------------------------------------------
    def _commit_and_submit(self, slot: InFlight) -> None:
        """Commit on top of the current best (its parent is the incumbent it is measured against), submit."""
        ws, it = self.session.workspace, slot.iteration
        slot.commit = ws.commit_candidate(slot.source, it, slot.description)
        # The parent, not a second read of best: a keep between two reads can't mislabel the incumbent.
        slot.incumbent_commit = ws.git("rev-parse", f"{slot.commit}^")
        slot.incumbent_source = ws.source(slot.incumbent_commit)
        self.remember(it, slot.source, slot.incumbent_commit)
        agent = slot.agent or self.agent
        # meta (e.g. the tuner's config) must survive a resume, so it is journalled first: killed
        # between the two, a proposal without its meta would be proposed again and refused as a repeat
        # (an iteration lost); a meta without its proposal only marks that config as tried.
        self.session.record(ev.ProposalMeta(it, slot.meta).to_json())
        self.emit(ev.CandidateProposed(it, slot.commit, slot.description,
                                       unified_diff(slot.incumbent_source, slot.source), slot.source,
                                       agent.name, agent.model, slot.incumbent_commit))
        self._submit(slot)

    def _submit(self, slot: InFlight) -> None:
        it, work = slot.iteration, self.session.work
        cand_path = self.session.workspace.write_candidate_file(slot.commit, work / f"candidate_{it:04d}.py")
        inc_path = work / f"incumbent_{it:04d}.py"
        inc_path.write_text(slot.incumbent_source)
        slot.files = (cand_path, inc_path)
        job = EvalJob(self.task.name, str(self.task.root), slot.source, slot.incumbent_source, it,
                      options_dict(self.options), str(cand_path), str(inc_path))
        self.flight.set(slot, "evaluating")
        self.emit(ev.EvalStarted(it, self.evaluator.name, call_timeout_s=self.call_timeout_s))
        slot.future = self.evaluator.submit(job)
        incumbent = slot.incumbent_commit
        slot.future.add_done_callback(lambda f, s=slot, inc=incumbent: self._arrived(s, f, inc))

    def _arrived(self, slot: InFlight, fut: Future, incumbent: str) -> None:
        """A verdict came back (any order, on a backend thread): journal it now, decide later."""
        with self.flight.cv:
            if slot.incumbent_commit != incumbent or slot.state != "evaluating" or self._ended:
                return  # a re-measurement replaced this job, or the run is over
            slot.state = "checking"
        verdict: Verdict | None = None
        try:
            # The backend's JSON object (the wire), read here once: the journal, the UI and the
            # decision get this record; the journal's line is its JSON again, byte for byte.
            verdict = Verdict.from_json({**fut.result(), "incumbent_commit": incumbent})
            if self.check_verdict is not None:  # (outside the lock: the end-to-end check takes a while)
                verdict = self.check_verdict(self.task, verdict, *slot.files)
            self.emit(ev.StaticResult(slot.iteration, not verdict.violations, verdict.violations))
            self.emit(ev.EvalResult(slot.iteration, verdict))
        except Exception as e:  # raised by the deciding thread in this candidate's turn
            slot.error = e
        slot.verdict = verdict
        self.flight.set(slot, "ready")

"""The loop with several candidates in flight, and the WorkerSet machinery, with an in-process backend whose timing the test controls.

Real git, real journal, real ScriptAgent; only where a job runs is faked (the real pool and Ray
backends are exercised in test_pool.py and test_ray.py).
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness import events as ev
from harness.agents.script import ScriptAgent
from harness.evaluate.backends import EvalJob, WorkerLost, WorkerSet, _Slot
from harness.loop import DecisionReply, Loop
from harness.sessions.session import Session
from harness.authoring.tasks import load_task

from .conftest import variant, write_batch

TASK = load_task("softmax")


class FakeBackend(WorkerSet):
    """Workers that 'evaluate' by sleeping job.delay seconds; a candidate with 'LOSE' in it loses its worker."""

    name = "fake"

    def __init__(self, n: int = 2, delays: dict[int, float] | None = None, lose: int = 0):
        super().__init__([_Slot(f"w{i}", str(i)) for i in range(n)])
        self.delays = delays or {}
        self.lose = lose  # how many times a LOSE job kills its worker
        self.runs: list[tuple[int, str, str]] = []  # (iteration, worker, incumbent sha)
        self.lock = threading.Lock()
        self.start()

    def _start_worker(self, slot):
        slot.pid = 1

    def _run_on(self, slot, job: EvalJob) -> dict:
        with self.lock:
            self.runs.append((job.iteration, slot.name, job.incumbent_sha256))
        time.sleep(self.delays.get(job.iteration, 0.05))
        if "LOSE" in job.candidate_source and self.lose > 0:
            with self.lock:
                self.lose -= 1
            raise WorkerLost(f"{slot.name} killed")
        return {"accepted": True, "stage": "done", "reasons": [], "shapes": [], "timing_available": False,
                "candidate_sha256": job.candidate_sha256,
                "recommendation": {"action": "revert", "reason": "canned", "can_keep": True}}


class Decider:
    def __init__(self, keep: set[int] = frozenset()):
        self.keep, self.asked = set(keep), []

    def decide(self, request):
        self.asked.append(request.iteration)
        return DecisionReply("keep" if request.iteration in self.keep else "revert", "human")


def job(src: str, it: int = 1) -> EvalJob:
    return EvalJob("softmax", str(TASK.root), src, TASK.baseline_path.read_text(), it, {})


# -- WorkerSet ------------------------------------------------------------------------------------
def test_the_same_job_runs_once_unless_forced():
    b = FakeBackend(1)
    try:
        f1, f2 = b.submit(job("A")), b.submit(job("A"))
        assert f1 is f2
        f1.result(timeout=5)
        assert b.submit(job("A")) is f1  # done map too, not only in flight
        f3 = b.submit(job("A"), force=True)
        assert f3 is not f1 and f3.result(timeout=5)["accepted"]
        assert len(b.runs) == 2
    finally:
        b.close()


def test_a_lost_worker_gets_its_job_retried_on_another_worker_once():
    b = FakeBackend(2, lose=1)
    try:
        v = b.submit(job("LOSE me")).result(timeout=10)
        assert v["accepted"] and v["worker"]["attempts"] == 2
        first, second = [w for _, w, _ in b.runs]
        assert first != second  # retried elsewhere
    finally:
        b.close()


def test_a_job_lost_twice_becomes_a_worker_lost_verdict():
    b = FakeBackend(2, lose=5)
    try:
        v = b.submit(job("LOSE me")).result(timeout=10)
        assert not v["accepted"] and v["stage"] == "import"
        assert v["reasons"][0]["rule"] == "worker-lost" and "after 2 attempts" in v["reasons"][0]["message"]
        assert v["recommendation"]["can_keep"] is False
        assert b.submit(job("fine")).result(timeout=10)["accepted"]  # the restarted workers still work
    finally:
        b.close()


def test_close_answers_queued_jobs_instead_of_hanging():
    b = FakeBackend(1, delays={1: 0.5})
    f1 = b.submit(job("A", 1))
    f2 = b.submit(job("B", 2))
    time.sleep(0.1)
    b.close()
    assert f1.result(timeout=5)["accepted"]
    v2 = f2.result(timeout=5)
    assert v2["reasons"][0]["rule"] == "worker-lost" and "closed" in v2["reasons"][0]["message"]


# -- the loop with several in flight ----------------------------------------------------------------
def script_dir(tmp_path: Path, n: int) -> Path:
    d = tmp_path / "script"
    write_batch(d, [(2 ** (6 + i), 4, False) for i in range(n)])
    return d


def run_loop(tmp_path, backend, decider, n=4, proposals=2, session=None):
    s = session or Session.create("softmax", "script", TASK.baseline_path.read_text(), base=tmp_path / "sessions")
    events: list[ev.Event] = []
    loop = Loop(s, TASK, ScriptAgent(script_dir(tmp_path, n)), decider, backend, emit=events.append,
                        max_iterations=20, proposals=proposals)
    reason = loop.run()
    return s, loop, events, reason


def test_verdicts_in_any_order_decisions_in_iteration_order(tmp_path):
    # iteration 1 is the slowest to evaluate: 2, 3 and 4 arrive first, yet 1 is decided first.
    backend = FakeBackend(3, delays={1: 1.0, 2: 0.05, 3: 0.05, 4: 0.05})
    decider = Decider()
    s, loop, events, reason = run_loop(tmp_path, backend, decider, n=4, proposals=3)
    assert reason.startswith("script: all 4 candidates")
    # In order; a proposer racing another for the same file may skip an iteration number.
    assert decider.asked == sorted(decider.asked) and len(decider.asked) == 4
    arrived = [e.iteration for e in events if isinstance(e, ev.EvalResult)]
    assert sorted(arrived) == decider.asked and arrived[0] != decider.asked[0]
    files = [a.meta.get("script_file") for a in loop.history]
    assert len(set(files)) == 4  # each prepared candidate proposed once, none twice
    assert len(backend.runs) == 4
    assert any(isinstance(e, ev.WorkerStatus) and any(w["state"] == "busy" for w in e.workers) for e in events)
    journal = s.journal.read()
    assert [r["iteration"] for r in journal if r["kind"] == "Decision"] == decider.asked


def test_a_candidate_measured_against_a_replaced_incumbent_is_measured_again(tmp_path):
    backend = FakeBackend(2, delays={1: 0.3})
    decider = Decider(keep={1})  # keeping 1 replaces the incumbent 2 and 3 were measured against
    s, loop, events, _ = run_loop(tmp_path, backend, decider, n=3, proposals=2)
    ws = s.workspace
    kept1 = ws.candidate_ref(1)
    assert ws.best == kept1
    proposed = [e for e in events if isinstance(e, ev.CandidateProposed)]
    later = sorted({e.iteration for e in proposed} - {1})
    assert len(later) == 2
    for it in later:
        mine = [e for e in proposed if e.iteration == it]
        if mine[0].incumbent != kept1:  # it was in flight when 1 was kept: measured twice
            assert len(mine) == 2 and mine[-1].incumbent == kept1
            runs = [r for r in backend.runs if r[0] == it]
            assert len(runs) == 2 and runs[0][2] != runs[1][2]
        # whichever way, the verdict it was decided on was measured against the new best
        last = [e for e in events if isinstance(e, ev.EvalResult) and e.iteration == it][-1]
        assert last.verdict.incumbent_commit == kept1
        assert ws.git("rev-parse", f"{ws.candidate_ref(it)}^") == kept1
    assert any(isinstance(e, ev.AgentNotice) and "measuring it again" in e.message for e in events)


@pytest.mark.parametrize("again_proposals", [2, 1])
def test_resume_decides_every_undecided_candidate(tmp_path, again_proposals):
    """Killed with several undecided; resumed with several proposers or with one (then they are
    decided, in order, before the first new proposal)."""
    backend = FakeBackend(2)

    class Crash:
        def decide(self, request):
            raise KeyboardInterrupt  # the person killed the session at the first question

    s = Session.create("softmax", "script", TASK.baseline_path.read_text(), base=tmp_path / "sessions")
    with pytest.raises(KeyboardInterrupt):
        run_loop(tmp_path, backend, Crash(), n=3, proposals=3, session=s)
    undecided = {r["iteration"] for r in s.journal.read() if r["kind"] == "CandidateProposed"}
    assert len(undecided) >= 2
    backend2 = FakeBackend(2)
    decider = Decider()
    again = Session.open(s.id, base=tmp_path / "sessions")
    _, loop, _, reason = run_loop(tmp_path, backend2, decider, n=3, proposals=again_proposals, session=again)
    assert decider.asked[:len(undecided)] == sorted(undecided)
    assert decider.asked == sorted(decider.asked)
    assert {a.meta.get("script_file") for a in loop.history if a.meta} == {p.name for p in (tmp_path / "script").glob("*.py")}
    assert "all 3 candidates" in reason


def test_an_agent_repeating_itself_never_costs_a_second_evaluation(tmp_path):
    from harness.agents.base import Proposal

    class Parrot:
        name, model = "parrot", ""

        def propose(self, ctx):
            yield Proposal(variant(256), "always the same")

    backend = FakeBackend(2, delays={1: 0.5})
    s = Session.create("softmax", "parrot", TASK.baseline_path.read_text(), base=tmp_path / "sessions")
    events: list[ev.Event] = []
    loop = Loop(s, TASK, Parrot(), Decider(), backend, emit=events.append, max_iterations=4, proposals=2)
    assert loop.run() == "iterations done"
    assert len(backend.runs) == 1  # in flight: asked again, then skipped; already decided: a duplicate
    assert any(isinstance(e, ev.AgentNotice) and "skipped" in e.message for e in events)
    assert all(a.outcome in ("no-candidate", "duplicate", "reverted") for a in loop.history)


def test_every_verdict_passes_the_loops_check_before_it_is_journalled_on_any_backend(tmp_path):
    # build_loop sets check_verdict to the end-to-end gate (harness.wiring.e2e_gate); a second loop
    # for --proposals N once skipped it. Here a check that stamps the verdict and sees the files evaluated.
    seen = []

    def stamp(task, verdict, candidate, incumbent):
        seen.append((candidate.name, incumbent.name, candidate.is_file() and incumbent.is_file()))
        verdict.extra["checked"] = True  # (a key the record doesn't name: journalled after the others)
        return verdict

    s = Session.create("softmax", "script", TASK.baseline_path.read_text(), base=tmp_path / "p")
    par = Loop(s, TASK, ScriptAgent(script_dir(tmp_path / "p", 2)), Decider(), FakeBackend(2),
               max_iterations=2, proposals=2)
    par.check_verdict = stamp
    par.run()
    t = Session.create("softmax", "script", TASK.baseline_path.read_text(), base=tmp_path / "s")
    seq = Loop(t, TASK, ScriptAgent(script_dir(tmp_path / "s", 2)), Decider(),
               lambda task, c, i: {"accepted": True, "stage": "done", "reasons": [], "shapes": [],
                                   "recommendation": {"action": "revert", "reason": "canned", "can_keep": True}},
               max_iterations=2)
    seq.check_verdict = stamp
    seq.run()
    for session in (s, t):
        verdicts = [r["verdict"] for r in session.journal.read() if r["kind"] == "EvalResult"]
        assert len(verdicts) == 2 and all(v["checked"] for v in verdicts)
    # both name their files the same way: candidate_NNNN.py against incumbent_NNNN.py
    assert sorted(seen) == [("candidate_0001.py", "incumbent_0001.py", True)] * 2 + \
        [("candidate_0002.py", "incumbent_0002.py", True)] * 2


def judged_by_its_code(task, candidate, incumbent) -> dict:
    """A verdict read off the candidate: the wrong one fails correctness, BLOCK=128 wins, the rest lose."""
    src = Path(candidate).read_text()
    if "wrong" in src:
        return {"accepted": False, "stage": "correctness", "reasons": [{"rule": "mismatch", "message": "wrong"}],
                "shapes": [], "recommendation": {"action": "revert", "reason": "wrong", "can_keep": False}}
    win = "BLOCK=128 " in src
    return {"accepted": True, "stage": "done", "reasons": [], "shapes": [], "timing_available": True,
            "recommendation": {"action": "keep" if win else "revert", "reason": "faster" if win else "slower",
                               "can_keep": True}}


def test_one_candidate_in_flight_is_the_sequence_and_two_decide_the_same(tmp_path):
    """The same scripted agent and policy through the loop with one proposer and with two, on the
    local backend: the same candidates get the same decisions, and the same one ends up best. With one
    in flight the journal is the plain sequence, iteration after iteration."""
    from harness.loop import AutoDecider

    batch = [(256, 4, False), (128, 4, False), (512, 2, False), (64, 4, True), (1024, 8, False)]
    runs = {}
    for n in (1, 2):
        folder = tmp_path / f"script{n}"
        files = [p.name for p in write_batch(folder, batch)]
        s = Session.create("softmax", "script", TASK.baseline_path.read_text(), base=tmp_path / f"s{n}")
        loop = Loop(s, TASK, ScriptAgent(folder), AutoDecider(), judged_by_its_code, max_iterations=20, proposals=n)
        assert loop.evaluator.name == "local" and loop.max_in_flight == (1 if n == 1 else 3)
        reason = loop.run()
        recs = s.journal.read()
        file_of = {r["iteration"]: r["meta"]["script_file"] for r in recs if r["kind"] == "ProposalMeta"}
        decisions = [r for r in recs if r["kind"] == "Decision"]
        runs[n] = {"reason": reason.split(" in ")[0],
                   "decided": sorted((file_of[d["iteration"]], d["action"], d["by"]) for d in decisions),
                   "best": s.workspace.source(s.workspace.best)}
        if n == 1:
            assert [file_of[d["iteration"]] for d in decisions] == files  # in the agent's order
            kinds = [r["kind"] for r in recs if r["kind"] not in ("PromptPacks", "Reasoning")]
            step = ["IterationStarted", "ProposalMeta", "CandidateProposed", "EvalStarted", "StaticResult",
                    "EvalResult", "Recommendation", "DecisionNeeded", "Decision"]
            wrong = [k for k in step if k != "DecisionNeeded"]  # a failed candidate: nothing to ask
            assert kinds[:-3] == step * 3 + wrong + step  # then the agent's last answer and the end
            assert kinds[-3:] == ["IterationStarted", "AgentNotice", "SessionEnded"]
    assert runs[1] == runs[2]
    assert ("02_block128_w4.py", "keep", "auto") in runs[1]["decided"]
    assert ("04_block64_w4_broken.py", "revert", "harness") in runs[1]["decided"]
    assert runs[1]["reason"] == "script: all 5 candidates"

"""The pool backend for real: worker processes, each evaluating through evaluate() (Triton interpreter)."""
from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from harness.agents.script import ScriptAgent
from harness.evaluate.backends import (BackendUnavailable, EvalJob, PoolEvaluator, RAY_INSTALL_HINT,
                                       make_evaluator)
from harness.loop import DecisionReply, Loop
from harness.sessions.session import Session

from .conftest import variant, write_batch


def jobs_for(task, specs):
    base = task.baseline_path.read_text()
    return [EvalJob(task.name, str(task.root), variant(*s), base, i, {}) for i, s in enumerate(specs, 1)]


def wait_busy(ev, iteration, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for w in ev.workers():
            if w["state"] == "busy" and w["iteration"] == iteration:
                return w
        time.sleep(0.05)
    raise AssertionError(f"no worker took iteration {iteration}: {ev.workers()}")


def test_specs_that_cannot_work_say_what_to_do(monkeypatch):
    for bad in ("gpu", "pool:0", "pool:x", "local:3"):
        with pytest.raises(BackendUnavailable, match="pool|local|ray"):
            make_evaluator(bad)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray weren't installed
    with pytest.raises(BackendUnavailable) as e:
        make_evaluator("ray")
    assert str(e.value) == RAY_INSTALL_HINT and "pip install 'ray[default]>=2.9'" in str(e.value)


def test_pool_evaluates_a_batch_on_several_workers_and_survives_a_killed_worker(small_task, tmp_path):
    specs = [(256, 4, False), (128, 4, True), (512, 2, False), (64, 1, False)]
    pool = PoolEvaluator(workers=2, log_dir=tmp_path / "logs")
    try:
        assert [w["gpu"] for w in pool.workers()] == ["-", "-"]  # interpreter workers, no GPU pinned
        jobs = jobs_for(small_task, specs)
        futs = [pool.submit(j) for j in jobs]
        assert pool.submit(jobs_for(small_task, specs[:1])[0]) is futs[0]  # same job: same future
        # Kill the worker running the first job mid-run: the job is retried on the other worker.
        victim = wait_busy(pool, 1)
        os.kill(victim["pid"], signal.SIGKILL)
        verdicts = [f.result(timeout=240) for f in futs]
        assert [v["accepted"] for v in verdicts] == [True, False, True, True]
        assert verdicts[1]["stage"] == "correctness"
        assert verdicts[0]["worker"]["attempts"] == 2 and verdicts[0]["worker"]["name"] != victim["name"]
        assert {v["worker"]["name"] for v in verdicts} == {"cpu0", "cpu1"}  # both workers did work
        assert all(v["candidate_sha256"] == j.candidate_sha256 for v, j in zip(verdicts, jobs))
        after = {w["name"]: w for w in pool.workers()}
        assert after[victim["name"]]["pid"] != victim["pid"]  # the slot was restarted: the pool kept its size
        assert all(w["state"] == "idle" for w in after.values())
        assert (tmp_path / "logs" / "cpu0.log").exists()
    finally:
        pool.close()
    assert all(w["state"] in ("idle", "dead") for w in pool.workers())


def test_parallel_loop_on_the_pool_keeps_and_re_measures(small_task, tmp_path):
    """The whole path: script agent, 2 proposers, pool of 2, a person who keeps the first candidate
    (overriding the CPU's 'no timing' revert), so a later one measured against the baseline is
    measured again."""
    folder = tmp_path / "script"
    batch = write_batch(folder, [(256, 4, False), (512, 2, False), (128, 4, True)])

    class KeepFirst:
        kept = False

        def decide(self, r):
            keep = r.can_keep and not self.kept
            self.kept |= keep
            return DecisionReply("keep" if keep else "revert", "human", confirmed_override=True)

    s = Session.create(small_task.name, "script", small_task.baseline_path.read_text(), base=tmp_path / "s")
    loop = Loop(s, small_task, ScriptAgent(folder), KeepFirst(), make_evaluator("pool:2"), proposals=2)
    assert loop.run().startswith("script: all 3")
    recs = s.journal.read()
    # A proposer takes its iteration number before it asks the agent, so which number gets which
    # file is a race between the two (one may end with no candidate and skip a number, as in
    # test_parallel): check by file, not by number.
    file_of = {r["iteration"]: r["meta"]["script_file"] for r in recs if r["kind"] == "ProposalMeta"}
    final = {r["iteration"]: r["verdict"] for r in recs if r["kind"] == "EvalResult"}  # the last per iteration
    decisions = [(r["iteration"], r["action"]) for r in recs if r["kind"] == "Decision"]
    assert sorted(file_of[it] for it, _ in decisions) == [p.name for p in batch]  # each file decided, once
    [kept] = [it for it, action in decisions if action == "keep"]
    [broken] = [it for it, _ in decisions if file_of[it] == batch[2].name]
    [later] = [it for it, _ in decisions if it not in (kept, broken)]
    assert later > kept and s.workspace.best == s.workspace.candidate_ref(kept)
    assert final[kept]["accepted"] and final[later]["accepted"] and not final[broken]["accepted"]
    # decided on a measurement against the kept candidate
    assert final[later]["incumbent_commit"] == s.workspace.candidate_ref(kept)
    assert final[later]["worker"]["backend"] == "pool"


def test_a_hung_pool_worker_is_killed_and_its_job_retried(small_task, tmp_path, monkeypatch):
    import harness.evaluate.backends as b

    # Stall limit 0: the first answer can't come in time, so both attempts end as 'killed'.
    monkeypatch.setattr(b, "stall_limit_s", lambda job: 0.0)
    pool = PoolEvaluator(workers=1, log_dir=tmp_path / "logs")
    try:
        v = pool.submit(jobs_for(small_task, [(256, 4, False)])[0]).result(timeout=120)
        assert v["reasons"][0]["rule"] == "worker-lost" and "gave no answer" in v["reasons"][0]["message"]
        assert v["worker"]["attempts"] == 2
    finally:
        pool.close()

"""The loop's state machine with the real tuner, real git and journal; evaluation injected.

(The end-to-end runs with the real evaluator are in test_cli_run.py.)
"""
from pathlib import Path

import pytest

from harness.agents.base import Attempt, ProposalContext
from harness.agents.tuner import TunerAgent, apply, find_knobs
from harness.loop import DecisionReply, Loop
from harness.sessions.session import Session
from harness.authoring.tasks import load_task

TASK = load_task("softmax")


def verdict(accepted=True, action="revert", can_keep=True, stage="done"):
    return {"accepted": accepted, "stage": stage, "reasons": [], "shapes": [], "timing_available": False,
            "recommendation": {"action": action, "reason": "canned", "can_keep": can_keep}}


class Scripted:
    def __init__(self, *actions):
        self.actions, self.requests = list(actions), []

    def decide(self, request):
        self.requests.append(request)
        a = self.actions.pop(0)
        if isinstance(a, BaseException):
            raise a
        if isinstance(a, tuple):  # (action, the person's reason)
            return DecisionReply(a[0], "human", a[1])
        return DecisionReply(a, "human")


def new_session(tmp_path):
    return Session.create("softmax", "tuner", TASK.baseline_path.read_text(), base=tmp_path)


def test_tuner_finds_launch_kwargs_and_module_constants():
    knobs = {k.key: k.value for k in find_knobs(TASK.baseline_path.read_text())}
    assert knobs == {"const:BLOCK": 1024, "launch0:num_warps": 4}


def test_module_constants_named_for_warps_and_stages_move_like_those_options():
    from harness.agents.tuner import neighbours

    knobs = {k.name: k for k in find_knobs("NUM_WARPS = 4\nNUM_STAGES = 3\nBLOCK_N = 32\nk[(1,)](x, num_warps=NUM_WARPS)\n")}
    assert sorted(neighbours(knobs["NUM_WARPS"])) == [2, 8]  # not a block size (4 < 16 had none)
    assert sorted(neighbours(knobs["NUM_STAGES"])) == [2, 4]
    assert sorted(neighbours(knobs["BLOCK_N"])) == [16, 64]


def test_tuner_rewrites_only_the_literal():
    src = "BLOCK = 1024\nk[(1,)](x, BLOCK=BLOCK, num_warps=4)\n"
    knobs = {k.key: k for k in find_knobs(src)}
    out = apply(src, {knobs["launch0:num_warps"]: 8})
    assert out == "BLOCK = 1024\nk[(1,)](x, BLOCK=BLOCK, num_warps=8)\n"


def test_tuner_never_repeats_a_config_and_stops_when_its_space_runs_out():
    import dataclasses

    task = dataclasses.replace(TASK, raw={k: v for k, v in TASK.raw.items() if k != "variants"})
    src = "BLOCK = 16\nk[(1,)](x, num_warps=1)\n"  # no variants, no declarations: literals on a ladder
    tuner, history = TunerAgent(), []
    seen = set()
    for it in range(1, 20):
        ctx = ProposalContext(task, it, src, "c", history)
        events = list(tuner.propose(ctx))
        proposal = [e for e in events if type(e).__name__ == "Proposal"]
        if not proposal:
            assert type(events[-1]).__name__ == "Exhausted"
            break
        cfg = tuple(sorted(proposal[0].meta["config"].items()))
        assert cfg not in seen
        seen.add(cfg)
        history.append(Attempt(it, proposal[0].description, "reverted", meta=proposal[0].meta))
    # BLOCK in {16, 32, 64} (powers of two, at least 16) x num_warps in {1, 2, 4}, less the incumbent
    assert len(seen) == 8 and ((("BLOCK", 16), ("num_warps", 1))) not in seen


def test_keeps_and_reverts_land_in_git_journal_and_results(tmp_path):
    s = new_session(tmp_path)
    loop = Loop(s, TASK, TunerAgent(), Scripted("keep", "revert", "keep"), lambda *a: verdict(), max_iterations=3)
    assert loop.run() == "iterations done"
    refs = s.workspace.refs("refs/")
    assert {"refs/kept/0001", "refs/kept/0003"} <= set(refs) and "refs/kept/0002" not in refs
    assert refs["refs/heads/best"] == refs["refs/candidates/0003"]
    decisions = [r for r in s.journal.read() if r["kind"] == "Decision"]
    assert [(d["action"], d["override"]) for d in decisions] == [("keep", True), ("revert", False), ("keep", True)]
    rows = (s.root / "results.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[4] for r in rows] == ["keep (override)", "revert", "keep (override)"]


def test_a_candidate_that_failed_correctness_is_reverted_without_asking(tmp_path):
    s = new_session(tmp_path)
    decider = Scripted("keep")
    loop = Loop(s, TASK, TunerAgent(), decider,
                lambda *a: verdict(accepted=False, stage="correctness", can_keep=False), max_iterations=1)
    loop.run()
    d = [r for r in s.journal.read() if r["kind"] == "Decision"][0]
    assert d["action"] == "revert" and d["by"] == "harness"  # journalled as the harness's decision
    assert not [r for r in s.journal.read() if r["kind"] == "DecisionNeeded"]
    assert decider.requests == []  # never asked
    assert "refs/kept/0001" not in s.workspace.refs("refs/")


def test_resume_re_asks_an_undecided_candidate_without_re_evaluating(tmp_path):
    s = new_session(tmp_path)
    evaluations = []

    def evaluate(task, cand, inc):
        evaluations.append(cand.name)
        return verdict()

    crash = Scripted("keep", KeyboardInterrupt())  # the app dies while iteration 2 awaits a decision
    with pytest.raises(KeyboardInterrupt):
        Loop(s, TASK, TunerAgent(), crash, evaluate, max_iterations=3).run()
    assert evaluations == ["candidate_0001.py", "candidate_0002.py"]

    again = Session.open(s.id, base=tmp_path)
    decider = Scripted("revert", "keep")
    loop = Loop(again, TASK, TunerAgent(), decider, evaluate, max_iterations=3)
    assert loop.run() == "iterations done"
    assert [r.iteration for r in decider.requests] == [2, 3]
    assert evaluations == ["candidate_0001.py", "candidate_0002.py", "candidate_0003.py"]
    tried = [a.meta["config"] for a in loop.history]
    assert len({tuple(sorted(c.items())) for c in tried}) == 3  # tuner memory survived the restart


def test_a_keep_journalled_before_a_kill_is_finished_on_resume(tmp_path):
    s = new_session(tmp_path)
    Loop(s, TASK, TunerAgent(), Scripted("revert"), lambda *a: verdict(), max_iterations=1).run()
    cand = s.workspace.candidate_ref(1)
    s.record({"kind": "Decision", "iteration": 1, "action": "keep", "by": "human", "commit": cand, "best": cand})
    assert s.workspace.best != cand  # killed before the ref moved
    Loop(Session.open(s.id, base=tmp_path), TASK, TunerAgent(), Scripted(), lambda *a: verdict(), max_iterations=1)
    assert s.workspace.best == cand


def test_stdin_b_keeps_for_winning_buckets_only(tmp_path):
    import io

    from harness.headless import StdinDecider

    v = verdict(action="revert")
    v["timing_available"] = True
    v["shapes"] = [  # softmax buckets: short [1,1025), mid [1025,16385), long [16385, inf)
        {"name": "many short rows", "correct": True, "speedup": 1.4, "candidate_us": 50.0, "incumbent_us": 70.0},
        {"name": "4k x 4k", "correct": True, "speedup": 0.8, "candidate_us": 50.0, "incumbent_us": 40.0},
    ]
    s = new_session(tmp_path)
    decider = StdinDecider(io.StringIO("b\n"), io.StringIO(), task=TASK)
    Loop(s, TASK, TunerAgent(), decider, lambda *a: v, max_iterations=1).run()
    keeps = [r for r in s.journal.read() if r["kind"] == "BucketKeep"]
    assert [k["buckets"] for k in keeps] == [["short"]]
    assert s.workspace.best != s.workspace.candidate_ref(1)


def test_a_keep_for_buckets_is_no_veto_to_the_agent_live_or_resumed(tmp_path):
    from harness.model.dispatch import KeepBucketsDecider
    from harness.loop import AutoDecider

    v = verdict(action="revert")
    v["timing_available"] = True
    v["shapes"] = [  # wins the short bucket clearly, loses mid: reverted overall, kept for short
        {"name": "many short rows", "correct": True, "speedup": 1.4, "noise_pct": 2.0, "candidate_us": 50.0,
         "incumbent_us": 70.0},
        {"name": "4k x 4k", "correct": True, "speedup": 0.8, "noise_pct": 2.0, "candidate_us": 50.0, "incumbent_us": 40.0},
    ]
    s = new_session(tmp_path)
    loop = Loop(s, TASK, TunerAgent(), KeepBucketsDecider(AutoDecider(), TASK, session=s), lambda *a: v,
                max_iterations=1)
    loop.run()
    assert [r["buckets"] for r in s.journal.read() if r["kind"] == "BucketKeep"] == [["short"]]
    # The tuner once read "kept for buckets short only" as the person's veto and excluded the
    # winner and its neighbours from its search.
    assert [a.veto_reason for a in loop.history] == [""]
    resumed = Loop(Session.open(s.id, base=tmp_path), TASK, TunerAgent(), Scripted(), lambda *a: v, max_iterations=1)
    assert [a.veto_reason for a in resumed.history] == [""]
    # A person's own words on a revert still are one.
    s2 = new_session(tmp_path / "b")
    human = Loop(s2, TASK, TunerAgent(), Scripted(("revert", "too many warps")), lambda *a: verdict(), max_iterations=1)
    human.run()
    assert [a.veto_reason for a in human.history] == ["too many warps"]


class Replays:
    """Proposes the given sources in turn (None: the incumbent unchanged)."""

    name, model = "replays", ""

    def __init__(self, *sources):
        self.sources, self.seen = list(sources), []

    def propose(self, ctx):
        from harness.agents.base import Exhausted, Proposal

        self.seen.append(list(ctx.history))
        if not self.sources:
            yield Exhausted("done")
            return
        src = self.sources.pop(0)
        yield Proposal(ctx.incumbent_source + "\n\n" if src is None else src, f"try {ctx.iteration}")


def test_code_already_measured_against_this_incumbent_is_not_evaluated_again(tmp_path):
    base = TASK.baseline_path.read_text()
    a = base.replace("BLOCK = 1024", "BLOCK = 512")
    b = base.replace("BLOCK = 1024", "BLOCK = 2048")
    # 1: the incumbent (plus trailing blank lines)  2: a, reverted  3: a again  4: b, kept
    # 5: a again, but now against b: a new question, evaluated
    agent = Replays(None, a, a + "   \n", b, a)
    evaluated = []

    def evaluate(task, cand, inc):
        evaluated.append(Path(cand).read_text())
        return verdict()

    s = new_session(tmp_path)
    Loop(s, TASK, agent, Scripted("revert", "keep", "revert"), evaluate, max_iterations=5).run()
    assert evaluated == [a, b, a]
    notices = [r["message"] for r in s.journal.read() if r.get("kind") == "AgentNotice"]
    assert "not evaluated: the proposal is the same code as the incumbent itself" in notices
    assert "not evaluated: the proposal is the same code as candidate 2, already measured against this " \
           "incumbent" in notices
    # the agent hears about both in its history (as it stood when asked for the 5th)
    assert [h.outcome for h in agent.seen[-1]] == ["duplicate", "reverted", "duplicate", "kept"]


class Named:
    """Proposes the incumbent plus a comment naming itself and the iteration; records when it was asked."""

    def __init__(self, name):
        self.name, self.model, self.asked = name, "m", []

    def propose(self, ctx):
        from harness.agents.base import Proposal

        self.asked.append(ctx.iteration)
        yield Proposal(ctx.incumbent_source + f"\n# {self.name} {ctx.iteration}\n", f"{self.name} {ctx.iteration}")


def run_in_thread(loop):
    import threading

    out = {}
    t = threading.Thread(target=lambda: out.setdefault("reason", loop.run()), daemon=True)
    t.start()
    return t, out


def test_pause_holds_the_next_proposal_a_new_agent_takes_over_and_stop_ends_the_run(tmp_path):
    import threading
    import time

    s = new_session(tmp_path)
    first, second = Named("first"), Named("second")
    paused = threading.Event()

    class Control:  # the person: pauses while deciding 1, stops while deciding 2
        def decide(self, request):
            if request.iteration == 1:
                loop.pause()
                paused.set()
            else:
                loop.stop()
            return DecisionReply("revert", "human")

    loop = Loop(s, TASK, first, Control(), lambda *a: verdict(), max_iterations=5)
    t, out = run_in_thread(loop)
    assert paused.wait(20)
    time.sleep(1.0)
    assert first.asked == [1]  # paused: nothing proposed after the decision
    loop.set_agent(second)
    loop.resume()
    t.join(20)
    assert out["reason"] == "stopped" and first.asked == [1] and second.asked == [2]
    journal = s.journal.read()
    assert [(r["iteration"], r["agent"]) for r in journal if r["kind"] == "CandidateProposed"] == \
        [(1, "first"), (2, "second")]
    assert [r["iteration"] for r in journal if r["kind"] == "Decision"] == [1, 2]  # the open question answered
    assert [r["iterations"] for r in journal if r["kind"] == "SessionEnded"] == [2]


def test_a_stop_while_the_agent_writes_ends_the_run_with_nothing_undecided(tmp_path):
    import threading
    import time

    from harness.agents.base import ReasoningChunk

    writing = threading.Event()

    class Slow:
        name, model = "slow", ""

        def propose(self, ctx):  # streams until the loop stops reading
            writing.set()
            while True:
                yield ReasoningChunk("thinking ")
                time.sleep(0.05)

    s = new_session(tmp_path)
    loop = Loop(s, TASK, Slow(), Scripted(), lambda *a: verdict(), max_iterations=3)
    t, out = run_in_thread(loop)
    assert writing.wait(20)
    loop.stop()
    t.join(20)
    assert out["reason"] == "stopped"
    journal = s.journal.read()
    assert not [r for r in journal if r["kind"] in ("CandidateProposed", "Decision")]
    assert [r["iterations"] for r in journal if r["kind"] == "SessionEnded"] == [0]  # the stopped one isn't counted
    assert Loop(Session.open(s.id, base=tmp_path), TASK, Slow(), Scripted(), lambda *a: verdict()).undecided == []


def test_a_spent_budget_stops_the_run_before_the_next_proposal(tmp_path):
    class Budget:
        exhausted, spent_usd = False, 0.0

    budget = Budget()

    class SpendsAtTwo:
        def decide(self, request):
            budget.exhausted = request.iteration == 2
            return DecisionReply("revert", "human")

    s = new_session(tmp_path)
    agent = Named("a")
    assert Loop(s, TASK, agent, SpendsAtTwo(), lambda *a: verdict(), max_iterations=5, budget=budget).run() \
        == "budget reached"
    assert agent.asked == [1, 2]


def test_after_a_bucket_keep_the_tuner_searches_around_that_bucket_winner(tmp_path):
    """The H200's README run: rows.py's defaults won the long bucket (kept for it, reverted overall);
    the tuner then read that keep as a veto, excluded it and its neighbours, and walked kernel.py's
    grid. It must climb from the long bucket's winner instead."""
    from harness.model.dispatch import KeepBucketsDecider
    from harness.loop import AutoDecider

    inc = {"4k x 4k": 40.0, "many short rows": 100.0, "vocab 32k": 130.0, "long rows 128k": 280.0}
    rows = {"4k x 4k": 60.0, "many short rows": 200.0, "vocab 32k": 100.0, "long rows 128k": 200.0}

    def timed_verdict(task, cand, _inc):
        src = Path(cand).read_text()
        mine = rows if "the row held in registers" in src else {k: 2 * v for k, v in inc.items()}
        shapes = []
        for s in TASK.shapes:
            c, i = mine[s.name], inc[s.name]
            # short and mid near their roofline (the search leaves them), long far from it
            pct = 40.0 if s.dims["cols"] > 16384 else 95.0
            shapes.append({"name": s.name, "dims": dict(s.dims), "correct": True, "candidate_us": c,
                           "incumbent_us": i, "speedup": i / c, "noise_pct": 2.0, "spread_pct": 1.0,
                           "spread_us": 0.1, "roofline_pct": pct * i / c if c < i else pct / 2})
        return {"accepted": True, "stage": "done", "reasons": [], "shapes": shapes, "timing_available": True,
                "geomean_speedup": 0.88, "noise_band_pct": 2.0,
                "recommendation": {"action": "revert", "reason": "slower overall", "can_keep": True}}

    s = new_session(tmp_path)
    loop = Loop(s, TASK, TunerAgent(s.root), KeepBucketsDecider(AutoDecider(), TASK, session=s), timed_verdict,
                max_iterations=6)
    loop.run()
    keeps = [r for r in s.journal.read() if r["kind"] == "BucketKeep"]
    assert [k["buckets"] for k in keeps] == [["long"]]
    assert loop.history[-1].meta["variant"] == "variants/rows.py", [a.meta for a in loop.history]
    assert all(not a.veto_reason for a in loop.history)

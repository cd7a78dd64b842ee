"""One assembly path: the TUI and the headless run build their loop through harness.wiring.build_loop,
each bringing only its own decider and event sink, so every option means the same in both.
(`--keep-buckets auto` was once wired for headless runs only: the TUI ignored it.)"""
from __future__ import annotations

import itertools

import pytest

from warpsmith.commands.run import headless_loop
from harness.model.dispatch import KeepBucketsDecider
from harness.headless import Printer
from harness.loop import AutoDecider, DecisionReply, DecisionRequest
from harness.authoring.tasks import load_task
from harness.wiring import RunConfig, e2e_gate, start_session
from harness.evaluate.records import Verdict

TASK = load_task("softmax")
MATRIX = [dict(auto=auto, keep_buckets=kb, proposals=n, timeout_s=t, iterations=3, agent="tuner")
          for auto, kb, n, t in itertools.product((False, True), ("off", "auto"), (1, 2), (None, 7.0))]


def describe(loop, front) -> dict:
    """What an option changes in a built loop, less the front end's own decider."""
    wrappers, d = [], loop.decider
    while d is not front:
        wrappers.append(type(d).__name__)
        d = d.inner
    return {"loop": type(loop).__name__, "wrappers": wrappers, "max_iterations": loop.max_iterations,
            "call_timeout_s": loop.call_timeout_s, "proposals": getattr(loop, "proposals", 1),
            "evaluator": getattr(getattr(loop, "evaluator", None), "name", None),
            "agent": type(loop.agent).__name__, "prompt": loop.prompt_builder is not None,
            "check_verdict": getattr(loop.check_verdict, "__name__", None)}


def close(loop) -> None:
    for c in loop.closers:
        c()


@pytest.mark.parametrize("opts", MATRIX, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_tui_and_headless_build_the_same_loop_for_every_option(tmp_path, opts, capsys):
    from tui.app import WarpsmithApp

    cfg = RunConfig(**opts)
    printer = Printer(show_reasoning=False)
    headless = headless_loop(start_session(TASK, cfg, base=tmp_path / "h"), TASK, cfg, printer)
    front = headless.decider
    while isinstance(front, KeepBucketsDecider):
        front = front.inner
    app = WarpsmithApp(TASK, start_session(TASK, cfg, base=tmp_path / "t"), cfg, start_loop=False)
    tui = app._default_factory(app.decider, lambda e: None)
    try:
        assert describe(tui, app.decider) == describe(headless, front)
        assert ("KeepBucketsDecider" in describe(tui, app.decider)["wrappers"]) == (cfg.keep_buckets == "auto")
        # the end-to-end gate on a verdict that recommends a keep, whichever loop runs
        assert tui.check_verdict is e2e_gate and headless.check_verdict is e2e_gate
        # --auto: each front end's own decider follows the recommendation
        assert app.decider.auto == cfg.auto and isinstance(front, AutoDecider) == cfg.auto
    finally:
        close(headless)
        close(tui)


def test_keep_buckets_auto_in_the_tui_keeps_a_loser_for_the_buckets_it_wins(tmp_path):
    from tui.app import WarpsmithApp

    cfg = RunConfig(auto=True, keep_buckets="auto", iterations=1)
    app = WarpsmithApp(TASK, start_session(TASK, cfg, base=tmp_path), cfg, start_loop=False)
    loop = app._default_factory(app.decider, lambda e: None)
    try:
        verdict = {"accepted": True, "timing_available": True, "shapes": [  # softmax: short [1,1025), mid ...
            {"name": "many short rows", "correct": True, "speedup": 1.4, "candidate_us": 50.0, "incumbent_us": 70.0},
            {"name": "4k x 4k", "correct": True, "speedup": 0.8, "candidate_us": 50.0, "incumbent_us": 40.0}]}
        reply = loop.decider.decide(DecisionRequest(1, "c" * 40, "d", Verdict.from_json(verdict), "revert",
                                                    "slower overall", True))
        assert isinstance(reply, DecisionReply) and reply.action == "revert" and reply.buckets == ["short"]
    finally:
        close(loop)

"""Pilot tests: every key and the decision flow, with a scripted agent and canned verdicts.

The Loop, the journal and the git workspace are real; only the agent (prepared candidates) and
the evaluator (fixed verdict dicts) are stand-ins. Script: #1 faster (recommend keep), #2 slower
but correct (recommend revert, keepable), #3 a torch fallback rejected by a rule (never keepable).
"""
from __future__ import annotations

from pathlib import Path

from textual.widgets import TabbedContent

from tui.screens.confirm import ConfirmScreen
from tui.screens.decide import RevertReasonScreen
from tui.screens.help import HelpScreen
from tui.screens.ideas import IdeasScreen
from tui.screens.model import ModelScreen
from tui.screens.packs import PackPickerScreen
from tui.screens.sessions import SessionsScreen
from tui.screens.task import TaskScreen
from tui.testing import make_app, screen_text
from tui.widgets.diff import DiffPane
from tui_helpers import FakeClock, journal_kinds, wait_prompt, wait_until

SIZE = (160, 48)


def decisions(app) -> list[dict]:
    return journal_kinds(app, "Decision")


async def decide(pilot, app, key: str, iteration: int) -> None:
    await wait_prompt(pilot, app, iteration)
    await pilot.press(key)
    await wait_until(pilot, lambda: any(d["iteration"] == iteration for d in decisions(app)), what="decision")


async def test_keep_recommended_goes_to_journal_and_git(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await decide(pilot, app, "k", 1)
        d = decisions(app)[0]
        assert (d["action"], d["by"], d["override"]) == ("keep", "human", False)
        # The screen moves on only after the journal has the decision.
        await wait_until(pilot, lambda: app.state.last_decision is not None)
        assert app.session.workspace.refs("refs/kept/") == {"refs/kept/0001": d["commit"]}
        assert app.session.workspace.best == d["commit"]
        assert app.state.tally["kept"] == 1
        await pilot.press("q")


async def test_enter_and_space_never_decide(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("enter", "space", "space", "enter")
        await pilot.pause(0.2)
        assert decisions(app) == []
        assert app.decider.pending is not None and app.decider.pending.iteration == 1
        assert not app.state.paused  # space pressed twice: pause then resume
        await pilot.press("r")
        await wait_until(pilot, lambda: decisions(app))
        assert decisions(app)[0]["action"] == "revert"
        await pilot.press("q")


async def test_keys_right_after_the_prompt_are_ignored(tmp_path: Path):
    clock = FakeClock()
    app = make_app(tmp_path, key_guard_s=0.3, clock=clock)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        clock.advance(0.1)
        await pilot.press("k", "r")
        await pilot.pause(0.2)
        assert decisions(app) == [] and app.decider.pending is not None
        clock.advance(0.3)
        await pilot.press("k")
        await wait_until(pilot, lambda: decisions(app))
        assert decisions(app)[0]["action"] == "keep"
        await pilot.press("q")


async def test_keep_against_recommendation_asks_and_is_an_override(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await decide(pilot, app, "k", 1)
        await wait_prompt(pilot, app, 2)
        assert app.decider.pending.action == "revert" and app.decider.pending.can_keep
        await pilot.press("k")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("enter")  # no default answer
        await pilot.pause(0.1)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        assert [d["iteration"] for d in decisions(app)] == [1]
        await wait_prompt(pilot, app, 2)
        await pilot.press("k")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.05)
        await pilot.press("y")
        await wait_until(pilot, lambda: len(decisions(app)) >= 2)  # (#3, rejected, is reverted at once after)
        d = decisions(app)[1]
        assert (d["action"], d["by"], d["override"]) == ("keep", "human", True)
        await pilot.press("q")


async def test_a_rejected_candidate_is_reverted_without_waiting_for_r(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await decide(pilot, app, "r", 1)
        await decide(pilot, app, "r", 2)
        # #3 cannot be kept: nobody is asked, the harness reverts it and says so in the journal
        await wait_until(pilot, lambda: len(decisions(app)) == 3)
        d = decisions(app)[2]
        assert (d["action"], d["by"]) == ("revert", "harness")
        assert app.decider.pending is None
        await wait_until(pilot, lambda: app.state.phase == "ended")
        # the rule hit is shown inline, naming the rule, and marked at its line in the diff
        text = screen_text(app)
        assert "no-torch-fallback" in text and "by harness" in text
        await pilot.press("f")
        await pilot.pause(0.05)
        assert app.run_screen.query_one(DiffPane).mode == "full"
        assert "^ no-torch-fallback" in screen_text(app)
        assert app.state.tally["rejected"] == 1 and app.state.tally["reverted"] == 2
        await pilot.press("q")


async def test_revert_with_a_reason_reaches_the_agent(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, RevertReasonScreen))
        await pilot.press("escape")  # back to the question, nothing decided
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        assert decisions(app) == []
        await wait_prompt(pilot, app, 1)
        await pilot.press("R")
        await wait_until(pilot, lambda: isinstance(app.screen, RevertReasonScreen))
        await pilot.press("enter")  # an empty reason is refused
        assert isinstance(app.screen, RevertReasonScreen)
        await pilot.press(*"loads are serial")
        await pilot.press("enter")
        await wait_until(pilot, lambda: decisions(app))
        d = decisions(app)[0]
        assert (d["action"], d["reason"]) == ("revert", "loads are serial")
        await wait_until(pilot, lambda: app.loop is not None and app.loop.history)
        assert app.loop.history[0].veto_reason == "loads are serial"
        await pilot.press("q")


async def test_ideas_are_journalled_and_saved(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("i")
        await wait_until(pilot, lambda: isinstance(app.screen, IdeasScreen))
        await pilot.press(*"pipeline the loads")
        await pilot.press("enter")
        await pilot.press(*"try 2 warps")
        await pilot.press("enter")
        await pilot.press("tab", "down", "delete")  # remove the highlighted (first) one
        await pilot.press("escape")
        await wait_until(pilot, lambda: journal_kinds(app, "IdeasChanged"))
        await wait_until(pilot, lambda: app.state.ideas == ["try 2 warps"])
        assert journal_kinds(app, "IdeasChanged")[-1]["ideas"] == ["try 2 warps"]
        assert app.session.meta.ideas == ["try 2 warps"]
        assert "try 2 warps" in screen_text(app)
        assert decisions(app) == []  # typing "i..." "k"-free text never decided anything
        await pilot.press("q")


async def test_model_switch_is_journalled_and_bad_specs_are_refused(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.press(*"nosuchagent:x", "enter")
        # Refused in the dialog, which stays open for a fix (tests/tui/test_model_preflight.py)
        await wait_until(pilot, lambda: "unknown agent" in str(app.screen.query_one("#model-problem").render()))
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        await pilot.pause(0.3)
        assert not journal_kinds(app, "AgentSwitched")
        await pilot.press("m")
        await wait_until(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.press(*"tuner", "enter")
        await wait_until(pilot, lambda: journal_kinds(app, "AgentSwitched"))
        assert journal_kinds(app, "AgentSwitched")[-1]["agent"] == "tuner"
        assert app.session.meta.agent == "tuner" and app.session.meta.options["agent"] == "tuner"
        await wait_until(pilot, lambda: app.state.agent.startswith("tuner"))
        await pilot.press("q")


async def test_auto_mode_follows_recommendations_the_open_question_included(tmp_path: Path):
    """`a` with #1 waiting: the status says AUTO, so the policy answers #1 too (keep, as recommended),
    no key is waited for, and the next ones follow."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("a")
        assert app.decider.auto and app.state.mode == "auto"
        assert "AUTO" in screen_text(app)
        await wait_until(pilot, lambda: len(decisions(app)) == 3, timeout=30)
        # (#3 cannot be kept: the harness reverts it, auto mode or not)
        assert [(d["action"], d["by"]) for d in decisions(app)] == [("keep", "auto"), ("revert", "auto"),
                                                                     ("revert", "harness")]
        modes = [r for r in app.session.journal.read() if r.get("kind") in ("DecisionMode", "Decision")]
        assert [r["kind"] for r in modes[:2]] == ["DecisionMode", "Decision"]  # the mode, then what it decided
        assert journal_kinds(app, "DecisionMode")[-1]["mode"] == "auto"
        await pilot.press("q")


async def test_space_pauses_before_the_next_proposal(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("space")
        assert app.state.paused and not app.loop.resume_gate.is_set()
        assert "PAUSED" in screen_text(app)
        await pilot.press("k")
        await wait_until(pilot, lambda: decisions(app))
        await pilot.pause(0.3)
        assert app.state.iteration == 1  # paused: no second proposal
        await pilot.press("space")
        await wait_prompt(pilot, app, 2)
        await pilot.press("q")


async def test_pack_picker_changes_the_session_selection(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(app.screen, PackPickerScreen))
        picker = app.screen
        await wait_until(pilot, lambda: picker.catalog is not None, what="pack catalog")
        assert "h200" in app.session.meta.packs
        from textual.widgets import SelectionList

        sl = picker.query_one(SelectionList)
        h200 = next(i for i in range(sl.option_count) if sl.get_option_at_index(i).value == "h200")
        sl.highlighted = h200
        await pilot.pause(0.05)
        assert "H200" in screen_text(app)  # the preview shows the pack's markdown
        await pilot.press("space", "a")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        assert "h200" not in app.session.meta.packs
        assert journal_kinds(app, "PacksSelected")[-1]["packs"] == app.session.meta.packs
        await pilot.press("q")


async def test_task_sessions_help_screens(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        for key, screen in (("t", TaskScreen), ("s", SessionsScreen), ("question_mark", HelpScreen)):
            await pilot.press(key)
            await wait_until(pilot, lambda: isinstance(app.screen, screen))
            await pilot.pause(0.1)
            text = screen_text(app)
            assert {"t": "interpreter", "s": app.session.id, "question_mark": "revert with a typed reason"}[key] in text
            await pilot.press("escape")
            await wait_until(pilot, lambda: app.screen is app.run_screen)
        await pilot.press("q")


async def test_diff_views_and_copy(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        diff = app.run_screen.query_one(DiffPane)
        # The prompt switches the layout (the diff widens): a loaded machine can be a frame behind.
        await wait_until(pilot, lambda: "+ BLOCK = 2048" in screen_text(app), what="the change on screen")
        assert diff.mode == "unified"
        await pilot.press("v")
        assert diff.mode == "split"
        await pilot.press("v", "f")
        assert diff.mode == "full"
        await pilot.press("c")
        assert app.clipboard == app.state.candidate.new and "BLOCK = 2048" in app.clipboard
        await pilot.press("q")


async def test_bell_rings_when_a_decision_waits(tmp_path: Path):
    app = make_app(tmp_path, bell=True)
    rings = []
    app.bell = lambda: rings.append(1)  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        assert rings == [1]
        await pilot.press("b")  # off
        await decide(pilot, app, "k", 1)
        await wait_prompt(pilot, app, 2)
        assert rings == [1]
        await pilot.press("q")


async def test_quit_during_evaluation_asks(tmp_path: Path):
    app = make_app(tmp_path, eval_delay_s=30)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.state.phase == "evaluating")
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        assert app.is_running
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.05)
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running)
    assert app.loop.cancel.is_set()


async def test_quit_with_a_question_open_then_resume_asks_again(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await decide(pilot, app, "k", 1)
        await wait_prompt(pilot, app, 2)
        await pilot.press("q")
        await wait_until(pilot, lambda: not app.is_running)
    app.loop_thread.join(5)
    assert not app.loop_thread.is_alive()
    assert [d["iteration"] for d in decisions(app)] == [1]
    # Resume: history comes back on screen, and the undecided candidate is asked again.
    again = make_app(tmp_path, session=app.session, resumed=True, script_dir=tmp_path / "script")
    async with again.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, again, 2)
        assert again.state.tally["kept"] == 1
        assert any(t.iteration == 1 for t in again.state.turns)
        assert any("decision: **keep** by human" in b.text for t in again.state.turns for b in t.blocks)
        await decide(pilot, again, "r", 2)
        await pilot.press("q")


async def test_narrow_terminal_uses_tabs(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_prompt(pilot, app, 1)
        tabs = app.run_screen.query_one(TabbedContent)
        assert tabs.active == "tab-reasoning"
        await pilot.press("2")
        assert tabs.active == "tab-diff"
        await pilot.press("3")
        assert tabs.active == "tab-bench"
        assert "Decide #1" in screen_text(app)  # the prompt is visible whichever tab is shown
        await pilot.press("k")
        await wait_until(pilot, lambda: decisions(app))
        await pilot.press("q")


async def test_resizing_switches_layout_and_keeps_content(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.resize_terminal(90, 30)
        await wait_until(pilot, lambda: app.run_screen.query(TabbedContent))
        await pilot.press("2")
        await pilot.pause(0.05)
        assert "BLOCK = 2048" in screen_text(app)
        await pilot.resize_terminal(*SIZE)
        await wait_until(pilot, lambda: not app.run_screen.query(TabbedContent))
        await pilot.press("k")
        await wait_until(pilot, lambda: decisions(app))
        await pilot.press("q")


async def test_long_reasoning_is_frozen_in_parts_and_nothing_is_lost(tmp_path: Path):
    from textual.widgets import Markdown, Static

    from tui.testing import make_script_dir, softmax_task
    from tui.widgets.reasoning import ReasoningPane

    script = make_script_dir(tmp_path / "script", softmax_task())
    long_text = "".join(f"### Step {i}\n\nThe loads are serial in chunk {i}; pipeline them.\n\n"
                        + ("```python\nx = tl.load(p)\n```\n\n" if i % 5 == 0 else "") for i in range(200))
    (script / "01_block2048.md").write_text(long_text)
    app = make_app(tmp_path, script_dir=script, chunk_chars=200)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        pane = app.run_screen.query_one(ReasoningPane)
        await pane.flush()
        sealed = list(pane.query(Static).filter(".sealed"))
        assert len(sealed) >= 3
        live = [m for m in pane.query(Markdown).filter(".stream")]
        assert "".join(s.source for s in sealed) + live[0].source == long_text
        await pilot.press("q")


async def test_K_keeps_for_the_winning_buckets_only(tmp_path: Path):
    from tui.testing import softmax_task, verdict

    task = softmax_task()
    v = verdict(task, timing=True, speedup=0.9)  # slower overall: the harness recommends revert
    short = next(s for s in v["shapes"] if s["name"] == "many short rows")
    short.update(speedup=1.3, candidate_us=short["incumbent_us"] / 1.3)
    app = make_app(tmp_path, verdicts=[v], iterations=1)
    async with app.run_test(size=SIZE) as pilot:
        await decide(pilot, app, "K", 1)
        d = decisions(app)[0]
        assert d["action"] == "revert" and "short" in d["reason"]
        keeps = journal_kinds(app, "BucketKeep")
        assert [k["buckets"] for k in keeps] == [["short"]]
        refs = app.session.workspace.refs("refs/")
        assert any(r.startswith("refs/buckets/") for r in refs)
        assert app.session.workspace.best != d["commit"]  # best did not move
        await pilot.press("q")


async def test_bench_pane_shows_the_incumbents_profile(tmp_path: Path):
    from harness import events as ev
    from tui.app import LoopEvent

    profile = {"task": "softmax", "shapes": [
        {"name": "4k x 4k", "us": 31.6, "bound": "memory", "memory_pct": 50.0, "compute_pct": 0.4, "launch_pct": 33.0,
         "hint": "memory-bound at 50% of the copy bandwidth"},
        {"name": "long rows 128k", "us": 283.0, "bound": "memory", "memory_pct": 45.0, "compute_pct": 0.3,
         "launch_pct": 4.0, "hint": "memory-bound at 45%"}]}
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        assert "profile" not in screen_text(app)  # nothing measured yet (no GPU here): nothing shown
        app.post_message(LoopEvent(ev.ProfileReady(1, "c0ffee1234abcd", profile)))
        bench = app.run_screen.query_one("#bench")
        bench.focus()
        await pilot.press("z")  # the bench sits beside the diff while deciding: maximised, all of it shows
        await wait_until(pilot, lambda: "incumbent c0ffee1234 profile" in screen_text(app), what="profile")
        text = screen_text(app)
        assert "long rows 128k" in text and "memory 45%" in text
        await pilot.press("q")

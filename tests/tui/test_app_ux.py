"""UX fixes found by using the app in tmux: the command palette, the footer and decision bar at 80
columns, the tab kept across modals, ctrl+q, the pack picker, the help screen, and a pack pick that
must survive a quit and a resume."""
from __future__ import annotations

import time
from pathlib import Path

from textual.command import CommandPalette
from textual.widgets import TabbedContent

from tui.screens.confirm import ConfirmScreen
from tui.screens.decide import RevertReasonScreen
from tui.screens.help import HelpScreen, help_markdown
from tui.screens.packs import OFF, ON, PackList, PackPickerScreen
from tui.screens.sessions import SessionsScreen
from tui.screens.task import TaskScreen
from tui.testing import demo_catalog, make_app, screen_text
from tui.widgets.decision import DecisionBar
from tui_helpers import journal_kinds, wait_prompt, wait_until

WIDE = (160, 48)


def titles(app) -> list[str]:
    return [c.title for c in app.get_system_commands(app.screen)]


def footer_line(app) -> str:
    """The keys bar's lines (one, or two where one can't hold the keys), as one line."""
    from tui.widgets.keys import KeysBar  # (one helper's need)

    height = app.run_screen.query_one(KeysBar).outer_size.height
    return "  ".join(screen_text(app).rstrip("\n").splitlines()[-height:])


async def run_from_palette(pilot, app, query: str, title: str) -> None:
    """ctrl+p, type `query`, choose the hit titled `title` (Enter), as a person would."""
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))
    await pilot.press(*query)

    def hit() -> int | None:
        cl = app.screen.query_one(CommandList)
        texts = [str(getattr(o.prompt, "plain", o.prompt)) for o in cl.options]
        return next((i for i, t in enumerate(texts) if t.startswith(title)), None)

    await wait_until(pilot, lambda: hit() is not None, what=f"palette hit {title!r}")
    app.screen.query_one(CommandList).highlighted = hit()
    await pilot.press("enter")


# -- 1: the command palette --------------------------------------------------------------------

async def test_palette_offers_the_actions_that_apply_now(tmp_path: Path):
    app = make_app(tmp_path, eval_delay_s=30, iterations=1)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.state.phase == "evaluating")
        now = titles(app)
        assert "Packs: pick the prompt's packs" in now and "Ideas for the agent" in now
        assert "Pause the loop" in now and "Help: every key" in now and "Sessions" in now
        assert not [t for t in now if t.startswith(("Keep", "Revert"))]  # no decision waiting
        assert not [t for t in now if "tab" in t]  # tabs only in the narrow layout
        await pilot.press("space")
        assert "Resume the loop" in titles(app)
        await pilot.press("space")
        # "pack" finds the picker in the palette, and choosing it opens it, as `p` does.
        app.pack_catalog = demo_catalog(tmp_path / "packs")
        await run_from_palette(pilot, app, "pack", "Packs: pick")
        await wait_until(pilot, lambda: isinstance(app.screen, PackPickerScreen), what="pack picker")
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        await pilot.press("q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.05)
        await pilot.press("y")


async def test_palette_keep_decides_like_k_despite_the_key_guard(tmp_path: Path):
    # The real guard (0.3 s, real clock): closing the palette restarts it, a palette choice is no
    # stray key, and the keep must go through.
    app = make_app(tmp_path, key_guard_s=0.3)
    async with app.run_test(size=WIDE) as pilot:
        await wait_prompt(pilot, app, 1)
        now = titles(app)
        assert {"Keep the candidate", "Revert the candidate", "Revert with a reason (revert+why)",
                "Keep buckets: keep for the buckets it wins only"} <= set(now)
        time.sleep(0.35)
        await run_from_palette(pilot, app, "keep", "Keep the candidate")
        await wait_until(pilot, lambda: journal_kinds(app, "Decision"), what="decision")
        d = journal_kinds(app, "Decision")[0]
        assert (d["iteration"], d["action"], d["by"]) == (1, "keep", "human")
        await wait_until(pilot, lambda: app.state.last_decision is not None)
        if app.decider.pending is None:  # between decisions: nothing to keep or revert
            assert not [t for t in titles(app) if t.startswith(("Keep", "Revert"))]
        await pilot.press("q")


# -- 2: footer and decision bar at 80 columns ---------------------------------------------------

async def test_help_and_quit_stay_in_the_footer_and_the_bar_is_compact_at_80_columns(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.pause(0.1)
        footer = footer_line(app)
        assert "? help" in footer and "q quit" in footer and "k keep" in footer, footer
        bar = app.run_screen.query_one(DecisionBar)
        text = screen_text(app)
        assert "Decide #1: harness recommends KEEP" in text and "r revert" in text
        assert bar.outer_size.height == 2  # prompt line + keys line: no rule above it at 80 columns
        await pilot.resize_terminal(100, 30)
        await pilot.pause(0.2)
        footer = footer_line(app)
        assert "? help" in footer and "q quit" in footer, footer
        await pilot.press("q")


# -- 3: the tab stays where the person put it ----------------------------------------------------

async def test_the_shown_tab_survives_every_modal(tmp_path: Path):
    app = make_app(tmp_path)
    app.pack_catalog = demo_catalog(tmp_path / "packs")
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_prompt(pilot, app, 1)
        tabs = app.run_screen.query_one(TabbedContent)
        for tab_key, tab in (("3", "tab-bench"), ("2", "tab-diff")):
            await pilot.press(tab_key)
            assert tabs.active == tab
            for key, screen in (("question_mark", HelpScreen), ("p", PackPickerScreen), ("t", TaskScreen),
                                ("s", SessionsScreen), ("R", RevertReasonScreen)):
                await pilot.press(key)
                await wait_until(pilot, lambda: isinstance(app.screen, screen), what=str(screen))
                await pilot.pause(0.05)
                await pilot.press("escape")
                await wait_until(pilot, lambda: app.screen is app.run_screen)
                await pilot.pause(0.05)
                assert tabs.active == tab, f"{key} closed: {tabs.active}"
        assert journal_kinds(app, "Decision") == []
        await pilot.press("q")


# -- 4: ctrl+q asks like q -----------------------------------------------------------------------

async def test_ctrl_q_asks_during_an_evaluation_and_ctrl_c_names_q(tmp_path: Path):
    app = make_app(tmp_path, eval_delay_s=30)
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.state.phase == "evaluating")
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("ctrl+q", "q")  # asked already: no second question on top
        await pilot.pause(0.1)
        assert sum(isinstance(s, ConfirmScreen) for s in app.screen_stack) == 1
        await pilot.press("n")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        assert app.is_running
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
        assert any("q" in str(n.message) and "ctrl+q" in str(n.message) for n in app._notifications)
        assert app.is_running
        await pilot.press("ctrl+q")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.05)
        await pilot.press("y")
        await wait_until(pilot, lambda: not app.is_running)


# -- 5: a pack pick survives a quit before the next prompt ------------------------------------

async def test_a_pack_pick_is_journalled_at_once_and_resume_uses_it(tmp_path: Path):
    from harness.sessions.session import Session
    from harness.wiring import select_packs

    app = make_app(tmp_path, eval_delay_s=30)
    app.pack_catalog = demo_catalog(tmp_path / "packs")
    app.session.meta.packs = ["reward-hacks"]
    app.state.packs = ["reward-hacks"]
    async with app.run_test(size=WIDE) as pilot:
        await wait_until(pilot, lambda: app.state.phase == "evaluating")
        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(app.screen, PackPickerScreen))
        picker = app.screen
        sl = picker.query_one(PackList)
        await wait_until(pilot, lambda: sl.option_count)
        sl.highlighted = next(i for i in range(sl.option_count) if sl.get_option_at_index(i).value == "h200")
        await pilot.press("space", "a")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        assert journal_kinds(app, "PacksSelected")[-1]["packs"] == ["reward-hacks", "h200"]
        await pilot.press("q")  # before the next prompt
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.05)
        await pilot.press("y")
    # What `warpsmith sessions resume` runs: the pick is the resumed session's selection.
    again = Session.open(app.session.id, tmp_path)
    assert select_packs(again, app.task_, app.cfg, resumed=True).selection.ids == ["reward-hacks", "h200"]


# -- 6: the pack picker -------------------------------------------------------------------------

async def test_pack_picker_shows_on_and_off_without_colour_and_does_not_wrap(tmp_path: Path):
    app = make_app(tmp_path, start_loop=False)
    app.pack_catalog = demo_catalog(tmp_path / "packs")  # h200, b200, deepseek-v4, reward-hacks
    async with app.run_test(size=WIDE) as pilot:
        await pilot.press("p")
        await wait_until(pilot, lambda: isinstance(app.screen, PackPickerScreen))
        picker = app.screen
        sl = picker.query_one(PackList)
        await wait_until(pilot, lambda: sl.option_count)
        await pilot.pause(0.05)
        lines = screen_text(app).splitlines()

        def row(needle: str) -> str:
            return next(line for line in lines if needle in line)

        assert ON + "h200" in row("h200  NVIDIA H200") and OFF + "b200" in row("b200  NVIDIA B200")
        assert ON + "reward-hacks (task)" in row("reward-hacks (task)")
        assert "[" not in row("── hardware ──")  # no box on section headers
        # The cursor starts on the first pack; up stays there (no wrap to reward-hacks at the end).
        first = sl.highlighted
        assert sl.get_option_at_index(first).value == "b200"
        await pilot.press("up")
        assert sl.highlighted == first
        await pilot.press("end", "down")
        assert sl.get_option_at_index(sl.highlighted).value == "reward-hacks"
        # Space on the highlighted row visibly changes it, and turning off the task's own rules
        # pack says its rules stay enforced (harness.guard.rules_for_task always applies them).
        await pilot.press("space")
        await pilot.pause(0.05)
        lines = screen_text(app).splitlines()
        assert OFF + "reward-hacks (task)" in row("reward-hacks (task)")
        note = str(picker.query_one("#packs-note").render())
        assert "rules are still enforced" in note and "only takes its text out of the prompt" in note
        assert "still enforced" in " ".join(screen_text(app).split())
        await pilot.press("a")
        await wait_until(pilot, lambda: app.screen is app.run_screen)
        assert app.session.meta.packs == ["h200"]
        assert any("still enforced" in str(n.message) for n in app._notifications)


def test_the_guard_enforces_the_tasks_rules_packs_whatever_the_selection():
    """What the picker's note says, checked against the guard itself."""
    from harness.evaluate.runner import EvalOptions
    from harness.guard import find_rules_pack, load_rules_pack, rules_for_task
    from tui.testing import softmax_task

    task = softmax_task()
    assert "reward-hacks" in task.rules
    assert EvalOptions().extra_rules == []  # the run's evaluator (wiring.build_loop's options) adds none
    enforced = {r.id for r in rules_for_task(task, extra=EvalOptions().extra_rules)}  # no selection in it
    own = {r.id for r in load_rules_pack(find_rules_pack("reward-hacks"))}
    assert own and own <= enforced


# -- 7: help mentions sideways scrolling in the diff ---------------------------------------------

def test_help_mentions_scrolling_the_diff_sideways():
    md = help_markdown()
    assert "scroll sideways" in md and "shift+←/→" in md and "command palette" in md and "ctrl+q" in md


async def test_keys_that_cannot_apply_are_not_offered(tmp_path: Path):
    """A candidate that failed a check is reverted by the harness, with no question and no keys
    offered for it; once the session has ended, the keys that steer the loop are gone too."""
    from tui.testing import softmax_task, verdict

    bad = verdict(softmax_task(), accepted=False, stage="correctness",
                  reasons=[{"rule": "incorrect", "message": "wrong on 4k x 4k"}])
    app = make_app(tmp_path, verdicts=[bad], iterations=1)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.run_screen
        footer = lambda: footer_line(app)  # noqa: E731
        await wait_until(pilot, lambda: app.state.phase == "ended", what="session end")
        assert [(d["action"], d["by"]) for d in journal_kinds(app, "Decision")] == [("revert", "harness")]
        assert not any(screen.check_action(a, ()) for a in ("keep", "keep_buckets", "revert", "revert_reason"))
        assert not any(screen.check_action(a, ()) for a in ("ideas", "model", "auto", "pause", "packs"))
        # (the session can end before the footer's first frame: wait for it to be drawn)
        await wait_until(pilot, lambda: "? help" in footer() and "pause" not in footer(),
                         what="the loop keys leaving the footer")
        assert "q quit" in footer()
        await pilot.press("q")

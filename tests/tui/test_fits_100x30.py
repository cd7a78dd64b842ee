"""The run screen at 100x30 (an SSH window beside an editor) and at 160: every key shown, the tally
never split inside a count, no speed figure where nothing was timed, history reasons as wide as the
table allows; and `a` decides the open candidate by the policy."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from harness import events as ev
from harness.evaluate.records import Verdict
from tui.screens.history import HistoryScreen
from tui.testing import (demo_catalog, demo_events, demo_sources, feed, make_session, present_decision,
                         screen_text, softmax_task, static_app, verdict)
from tui.widgets.bench import BenchPane
from tui.widgets.keys import KeysBar
from tui_helpers import wait_until

SMALL = (100, 30)


async def deciding(app, pilot, untimed: bool = False) -> None:
    task = softmax_task()
    old, new = demo_sources(task)
    events = demo_events(task, old, new, "decide")
    if untimed:  # a machine without a GPU: every verdict without timings
        events = [dataclasses.replace(e, verdict=Verdict.from_json(verdict(task, timing=False))) if isinstance(e, ev.EvalResult)
                  else e for e in events]
    await feed(app, events, {1: old, 2: new})
    present_decision(app, events)
    await wait_until(pilot, lambda: app.decider.shown_at is not None)
    await wait_until(pilot, lambda: app.run_screen.query_one(BenchPane).roof_ready)
    await pilot.pause(0.1)


def shown_bindings(app) -> list[str]:
    """`key description` of every binding the screen shows now (check_action hides the rest)."""
    out = []
    for _, b, enabled, _ in app.screen.active_bindings.values():
        if b.show and enabled and f"{app.get_key_display(b)} {b.description}" not in out:
            out.append(f"{app.get_key_display(b)} {b.description}")
    return out


async def test_at_100x30_every_key_that_applies_is_shown(tmp_path: Path):
    app = static_app(tmp_path)
    app.pack_catalog = demo_catalog(tmp_path / "packs")
    async with app.run_test(size=SMALL) as pilot:
        await deciding(app, pilot)
        bar = app.run_screen.query_one(KeysBar)
        lines = screen_text(app).rstrip("\n").splitlines()[-bar.outer_size.height:]
        keys = "  ".join(line.strip() for line in lines)
        wanted = shown_bindings(app)
        assert {"k keep", "r revert", "space pause", "p packs", "z max pane", "h history"} <= set(wanted)
        for k in wanted + ["^p palette"]:
            assert k in keys, (k, lines)
        assert bar.outer_size.height == 2
        # Wide enough for one line, it takes one.
        await pilot.resize_terminal(220, 40)
        await pilot.pause(0.2)
        assert app.run_screen.query_one(KeysBar).outer_size.height == 1  # (recomposed: three panes)


async def test_a_click_on_a_key_presses_it(tmp_path: Path):
    app = static_app(tmp_path)
    app.pack_catalog = demo_catalog(tmp_path / "packs")
    async with app.run_test(size=SMALL) as pilot:
        await deciding(app, pilot)
        bar = app.run_screen.query_one(KeysBar)
        line, start, _, key = next(s for s in bar._spans if s[3] == "question_mark")
        await pilot.click(KeysBar, offset=(start + 1 + bar.styles.padding.left, line))
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help from a click")


async def test_without_timing_no_speed_figure_and_the_tally_never_splits_a_count(tmp_path: Path):
    app = static_app(tmp_path)
    app.pack_catalog = demo_catalog(tmp_path / "packs")
    async with app.run_test(size=(160, 48)) as pilot:
        await deciding(app, pilot, untimed=True)
        text = screen_text(app)
        assert "timing unavailable" in text and "1.000x" not in text
        app.decider._pending = None  # the three-pane layout, where the tally split before
        await app.run_screen.redraw({"decision", "bench"})
        await pilot.pause(0.2)
        lines = screen_text(app).splitlines()
        assert any(" ".join(line.split()).endswith("kept 1 reverted 0 rejected 0 incorrect 0 crashed 0 │")
                   for line in lines), lines  # one line in the bench pane
        for width in (120, 130, 100):
            await pilot.resize_terminal(width, 48)
            await pilot.pause(0.2)
            bench = [line for line in screen_text(app).splitlines() if "crashed" in line or "kept" in line]
            assert all("crashed 0" in line or "crashed" not in line for line in bench), bench


REASON = ("too many rows per program for the long shape; try splitting each row across co-resident "
          "programs instead")


def session_with_reasons(tmp_path: Path):
    task = softmax_task()
    s = make_session(tmp_path, task)
    for i in (1, 2):
        c = s.workspace.commit_candidate(f"BLOCK = {i}\n", i, f"try {i}")
        for e in (ev.IterationStarted(i),
                  ev.CandidateProposed(i, c, f"BLOCK {512 * i}, {i} warps", "", "", "script", "demo",
                                       s.workspace.baseline),
                  ev.EvalResult(i, Verdict.from_json(verdict(task, timing=False))),
                  ev.Decision(i, "revert", "human", False, REASON, c, s.workspace.baseline)):
            s.record(e.to_dict())
    return s


async def test_history_reasons_take_the_width_there_is(tmp_path: Path):
    app = static_app(tmp_path, session=session_with_reasons(tmp_path))
    async with app.run_test(size=SMALL) as pilot:
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(app.screen, HistoryScreen) and app.screen.loaded)
        await pilot.pause(0.1)
        row = next(line for line in screen_text(app).splitlines() if "BLOCK 512" in line)
        cut = row[row.index("too many"):].rstrip(" │")
        assert cut.endswith("…") and len(row.rstrip(" │")) >= SMALL[0] - 6, row  # to the table's edge
        await pilot.resize_terminal(200, 30)
        await pilot.pause(0.3)
        row = next(line for line in screen_text(app).splitlines() if "BLOCK 512" in line)
        assert REASON in row  # room for all of it: all of it

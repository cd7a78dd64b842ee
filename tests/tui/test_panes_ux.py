"""The diff and bench panes as a person reads them in tmux: the change must be on screen and
marked by a character (not only a colour), sideways scrolling must be quick, focus must show,
and the bench must not mix an earlier candidate's verdict up with the current one."""
from __future__ import annotations

import re
from pathlib import Path

from textual.widgets import DataTable, Sparkline

from harness import events as ev
from harness.evaluate.records import Verdict
from tui.state import CandidateView, RunState
from tui.testing import demo_events, demo_sources, feed, make_app, make_script_dir, screen_text, softmax_task, static_app
from tui.widgets.bench import BenchPane, verdict_head, verdict_lines
from tui.widgets.diff import (CHANGED, SEP, SIDE_STEP, DiffPane, opening_x, render_split, render_unified,
                              sideways_offset, split_digits)
from tui.widgets.reasoning import ReasoningPane
from tui.widgets.status import status_text
from tui_helpers import wait_prompt, wait_until

SIZE = (160, 48)
# While deciding the diff gets 100+ columns of code at 160: the sideways tests need a narrower
# terminal for the demo's longest line (95 columns) not to fit.
SIDEWAYS_SIZE = (130, 48)


def _warps_only() -> tuple[str, str]:
    """The best and a candidate that only changes the launch's num_warps, at the end of a long line."""
    base = softmax_task().baseline_path.read_text()
    assert "num_warps=4)" in base
    return base, base.replace("num_warps=4", "num_warps=8")


def _warps_script(tmp_path: Path) -> Path:
    script = make_script_dir(tmp_path / "script", softmax_task())
    (script / "01_block2048.py").write_text(_warps_only()[1])
    return script


def _plain(view) -> list[str]:
    return [t.plain for t in view.renderable.renderables]


# -- pure rendering ---------------------------------------------------------------------------
def test_sideways_offset_only_moves_for_a_change_out_of_view():
    assert sideways_offset(8, 12, 40) == 0  # in view
    assert sideways_offset(4, 60, 40) == 0  # starts well inside: line numbers and indentation stay
    x = sideways_offset(88, 89, 18)
    assert 0 < x <= 88 and 89 - x <= 18  # the change shows


def test_split_gives_each_side_half_and_marks_changed_lines_with_a_character():
    old, new = _warps_only()
    c = CandidateView(1, "c0ffee", "8 warps", old, new)
    width = 51
    lw = (width - 1) // 2
    d = split_digits(c)
    lines = _plain(render_split(c, width, opening_x("split", c, width)))
    rows = [s for s in lines[1:] if len(s) > lw and s[lw] == SEP]
    assert rows and all(len(s) == width for s in rows)  # exactly the pane: nothing cut by Textual
    changed = [s for s in rows if s[d] == "-" or s[lw + 1 + d] == "+"]
    assert len(changed) == 1
    row = changed[0]
    assert row[d] == "-" and row[lw + 1 + d] == "+"  # visible without colour
    left, right = row[:lw], row[lw + 1:]
    assert "num_warps=4" in left and "num_warps=8" in right  # shifted to the change
    unchanged = [s for s in rows if s is not row]
    assert all(s[d] == " " and s[lw + 1 + d] == " " for s in unchanged)


def test_split_shift_moves_both_sides_and_keeps_the_gutter():
    old, new = _warps_only()
    c = CandidateView(1, "c0ffee", "8 warps", old, new)
    at0, at16 = _plain(render_split(c, 60, 0)), _plain(render_split(c, 60, 16))
    i = next(k for k, s in enumerate(at0) if s.startswith("42-"))
    assert at16[i].startswith("42-") and "…" in at16[i]  # line number and mark stay; hidden part shown as …
    assert at0[i] != at16[i]


def test_unified_opens_at_a_change_at_the_end_of_a_long_line_with_the_gutter_in_view():
    old, new = _warps_only()
    c = CandidateView(1, "c0ffee", "8 warps", old, new)
    width = 51  # the diff pane's content at 160 columns
    x = opening_x("unified", c, width)
    assert x > 0
    lines = _plain(render_unified(c, width, x))
    plus = next(s for s in lines if s[10:11] == "+")
    minus = next(s for s in lines if s[10:11] == "-")
    assert "num_warps=8" in plus and "num_warps=4" in minus
    assert plus.startswith("       42 + …") and len(plus) <= width
    # the characters that differ are set apart (underlined) too
    whole = render_unified(c).renderable.renderables
    t = next(t for t in whole if t.plain[10:11] == "+")
    assert any(sp.style == CHANGED and t.plain[sp.start:sp.end].strip() == "8" for sp in t.spans)


# -- bench and status -------------------------------------------------------------------------
def _rejected_state(n: int) -> RunState:
    s = RunState(task="softmax")
    msgs = [f"torch.softmax computes the answer instead of a Triton kernel, which the task forbids ({i})"
            for i in range(n)]
    verdict = {"accepted": False, "stage": "static", "timing_available": False, "shapes": [],
               "reasons": [{"rule": "static:no-torch-fallback", "message": m + f" (line {30 + i})"}
                           for i, m in enumerate(msgs)]
               + [{"rule": "correctness", "message": "max abs error 0.5 on long rows\nfirst bad row 3"}],
               "violations": [{"rule": "no-torch-fallback", "message": m, "line": 30 + i, "col": 5}
                              for i, m in enumerate(msgs)]}
    s.apply(ev.IterationStarted(4))
    s.apply(ev.EvalResult(4, Verdict.from_json(verdict)))
    s.apply(ev.Recommendation(4, "revert", msgs[0], False))
    return s


def test_bench_lists_one_line_per_violation_rule_and_line_only():
    lines = [t.plain for t in verdict_lines(_rejected_state(4))]
    bullets = [s for s in lines if s.startswith("• ")]
    assert bullets[:4] == [f"• no-torch-fallback  line {30 + i}" for i in range(4)]
    assert bullets[4] == "• correctness: max abs error 0.5 on long rows"  # first line of a non-rule reason
    assert not any("torch.softmax computes" in s for s in lines)  # the full text is the diff's and the reasoning's
    assert all(t.no_wrap for t in verdict_lines(_rejected_state(4)) if t.plain.startswith("• "))
    assert len(lines) <= 8


def test_status_shows_no_iteration_that_never_had_a_candidate_once_ended():
    s = RunState(task="softmax", phase="starting")
    s.apply(ev.IterationStarted(1))
    s.apply(ev.CandidateProposed(1, "c1", "d", "", "src", "tuner", ""))
    s.apply(ev.Decision(1, "revert", "human"))
    s.apply(ev.IterationStarted(2))
    assert "softmax #2" in status_text(s).plain  # proposing #2: shown while the run goes on
    s.apply(ev.SessionEnded("no untried neighbours", "c0", 1))
    plain = status_text(s).plain
    assert "softmax #1" in plain and "#2" not in plain
    ended_early = RunState(task="softmax")
    ended_early.apply(ev.IterationStarted(1))
    ended_early.apply(ev.SessionEnded("agent gave up", "c0", 0))
    assert "#" not in status_text(ended_early).plain.split("softmax", 1)[1].split("│")[0]


# -- on screen --------------------------------------------------------------------------------
async def test_a_change_at_the_end_of_a_long_line_is_on_screen_in_unified_and_split(tmp_path: Path):
    app = make_app(tmp_path, script_dir=_warps_script(tmp_path), iterations=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.pause(0.1)
        diff = app.run_screen.query_one(DiffPane)
        # While deciding the diff has 100+ columns of code: the line fits whole, no shift needed;
        # split (half each side) shifts to the change.
        assert diff.mode == "unified" and diff.x == 0
        text = screen_text(app)
        assert re.search(r"42 +- .*num_warps=4", text) and re.search(r"42 \+ .*num_warps=8", text)
        await pilot.press("v")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert diff.x > 0
        assert re.search(r"42- .*num_warps=4.*│\s*42\+ .*num_warps=8", text), text
        await pilot.press("q")


async def test_a_change_off_screen_is_shown_when_the_diff_tab_opens_at_80x24(tmp_path: Path):
    app = make_app(tmp_path, script_dir=_warps_script(tmp_path), iterations=1)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("2")
        await pilot.pause(0.1)
        assert "num_warps=8" in screen_text(app)
        await pilot.press("q")


async def test_sideways_keys_step_and_jump_and_focus_shows_without_colour(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIDEWAYS_SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        diff = app.run_screen.query_one(DiffPane)
        reasoning = app.run_screen.query_one(ReasoningPane)
        assert diff.styles.border_top[0] == "round"
        reasoning.focus()
        await pilot.press("tab")
        await wait_until(pilot, lambda: diff.has_focus, what="diff focused by Tab")
        assert diff.styles.border_top[0] == "heavy"  # a different line, not only a colour
        for mode_key in ("", "v"):
            if mode_key:
                await pilot.press(mode_key)
            assert diff.x == 0 and diff.max_x > SIDE_STEP
            await pilot.press("right")
            assert diff.x == SIDE_STEP
            assert f"col {SIDE_STEP + 1}" in str(diff.border_subtitle)
            await pilot.press("shift+right")
            assert diff.x == diff.max_x
            await pilot.press("left")
            assert diff.x == diff.max_x - SIDE_STEP
            await pilot.press("shift+left")
            assert diff.x == 0
        await pilot.press("q")


async def test_no_sparkline_before_the_first_decision(tmp_path: Path):
    app = make_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        spark = app.run_screen.query_one("#history", Sparkline)
        assert not spark.display
        app.run_screen.query_one(BenchPane).scroll_end(animate=False)  # beside the diff, it is shorter
        await pilot.pause()
        assert "no decisions yet" in screen_text(app) and "█" not in screen_text(app)
        await pilot.press("r")
        await wait_until(pilot, lambda: app.state.best_history, what="decision")
        await pilot.pause(0.05)
        assert spark.display and "no decisions yet" not in screen_text(app)
        await pilot.press("q")


async def test_bench_labels_the_previous_verdict_while_a_newer_candidate_is_evaluated(tmp_path: Path):
    task = softmax_task()
    old, new = demo_sources(task)
    events = demo_events(task, old, new, "decide")
    upto = next(i for i, e in enumerate(events) if isinstance(e, ev.EvalStarted) and e.iteration == 2)
    app = static_app(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await feed(app, events[:upto + 1], {1: old, 2: new})
        await pilot.pause()
        bench = app.run_screen.query_one(BenchPane)
        head = verdict_head(app.state).plain
        assert head.startswith("previous: #1 accepted") and "now #2" in head
        assert bench.has_class("-previous")
        text = screen_text(app)
        assert "previous: #1 accepted" in text and "decided KEEP by human" in text
        assert "recommend KEEP" not in text
        await feed(app, events[upto + 1:], {1: old, 2: new})  # #2's verdict: current again
        await pilot.pause()
        assert not bench.has_class("-previous") and verdict_head(app.state).plain.startswith("#2 accepted")
        assert app.run_screen.query_one("#shapes", DataTable).row_count > 0


async def test_a_redraw_of_the_same_candidate_keeps_the_sideways_position(tmp_path: Path):
    """A verdict arriving (or another iteration's event in a parallel run) redraws the diff: the
    column the person scrolled to stays; only a new candidate opens at its first change again."""
    app = make_app(tmp_path)
    async with app.run_test(size=SIDEWAYS_SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        diff = app.run_screen.query_one(DiffPane)
        diff.focus()
        await pilot.press("shift+left", "right", "right")
        assert diff.x == 2 * SIDE_STEP
        diff.show(app.state.candidate)  # what every StaticResult / EvalResult redraw does
        await pilot.pause()
        assert diff.x == 2 * SIDE_STEP
        moved = CandidateView(**{**vars(app.state.candidate), "commit": "f" * 40})
        diff.show(moved)  # a new candidate
        await pilot.pause()
        assert diff.x == opening_x(diff.mode, moved, diff.content_region.width) or diff.x == 0
        await pilot.press("q")


def test_many_hits_of_one_rule_off_the_hunks_take_one_entry_above_the_diff():
    old, new = _warps_only()
    hits = [{"rule": "no-block-name", "message": "Do not name a constant BLOCK.", "line": n, "col": 1}
            for n in (3, 5, 7, 9, 11, 13, 15, 17)]
    c = CandidateView(1, "c0ffee", "8 warps", old, new, violations=hits)
    lines = _plain(render_unified(c, 120, 0))
    marks = [s for s in lines if s.startswith("! ")]
    assert marks == ["! lines 3, 5, 7, 9, 11, 13 (+2): no-block-name: Do not name a constant BLOCK."]

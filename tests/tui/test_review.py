"""Reviewing a candidate at a glance (issue 21): z maximises a pane, the diff gets the width while
deciding, h lists every candidate of the session (also a resumed one) and reopens any of them
read-only, and the bench says where each shape stands: speedup with its band, % of the hardware
pack's roofline, and which keep the incumbent came from."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from harness import events as ev
from harness.authoring.packs import BUILTIN_PACKS, load_pack
from harness.profiling.roofline import hbm_roof
from harness.evaluate.records import Verdict
from tui.screens.history import CandidateScreen, HistoryScreen, history_row
from tui.state import RunState
from tui.testing import make_app, make_script_dir, screen_text, softmax_task, verdict
from tui.widgets.bench import BenchPane, legend_text, lineage_text, shape_rows, within_noise
from tui.widgets.diff import DiffPane, UNIFIED_GUTTER
from tui_helpers import wait_prompt, wait_until

SIZE = (160, 48)


# -- the roofline: a fake verdict against the real h200 pack ---------------------------------------
def test_roofline_pct_is_bytes_over_the_packs_bandwidth_against_the_measured_time():
    task = softmax_task()
    h200 = load_pack(BUILTIN_PACKS / "hardware" / "h200", "builtin")
    roof = hbm_roof(task, [load_pack(BUILTIN_PACKS / "rules" / "reward-hacks", "builtin"), h200])
    assert roof is not None and roof.pack == "h200" and roof.hbm_tb_s == 4.8  # the rules pack has no specs
    shape = next(s for s in task.shapes if s.name == "long rows 128k")
    bytes_moved = 2 * shape.dims["rows"] * shape.dims["cols"] * 2  # read + write, bf16
    floor_us = bytes_moved / 4.8e12 * 1e6
    fake = Verdict.from_json({"accepted": True, "timing_available": True, "shapes": [
        {"name": shape.name, "correct": True, "incumbent_us": 300.0, "candidate_us": 250.0,
         "speedup": 1.2, "noise_pct": 1.0, "roofline_pct": 99.0}]})
    row = shape_rows(fake, roof)[0]
    assert row[3] == f"{floor_us / 250.0 * 100:.0f}%" == "45%"  # 537 MB in 250 µs; not the verdict's own 99%
    assert roof.pct(shape.name, 250.0) == pytest.approx(floor_us / 250.0 * 100)
    assert "h200 HBM 4.8 TB/s" in legend_text(fake, roof).plain
    # No hardware pack: the evaluator's own figure (against its measured copy bandwidth), said so.
    assert shape_rows(fake, None)[0][3] == "99%"
    assert "measured copy bandwidth" in legend_text(fake, None).plain
    assert hbm_roof(task, [load_pack(BUILTIN_PACKS / "rules" / "reward-hacks", "builtin")]) is None


def test_a_speedup_inside_its_noise_band_is_marked_and_a_wrong_shape_says_so():
    v = Verdict.from_json({"shapes": [{"name": "a", "correct": True, "speedup": 1.01, "noise_pct": 1.5},
                                      {"name": "b", "correct": True, "speedup": 1.05, "noise_pct": 1.5},
                                      {"name": "c", "correct": False, "speedup": None, "noise_pct": None}]})
    assert [within_noise(s) for s in v.shapes] == [True, False, False]
    rows = shape_rows(v)
    assert [r[1] for r in rows] == ["~1.010x", "1.050x", "wrong"]
    assert [r[2] for r in rows] == ["±1.5%", "±1.5%", "-"]


def test_the_incumbents_lineage_names_the_keeps_it_came_from():
    s = RunState()
    for it, commit, action in ((1, "aaa111", "keep"), (2, "bbb222", "revert"), (3, "ccc333", "keep")):
        s.apply(ev.CandidateProposed(it, commit, f"c{it}", "", "src", incumbent="base00" if it < 3 else "aaa111"))
        s.apply(ev.Decision(it, action, "human", commit=commit))
    s.apply(ev.CandidateProposed(4, "ddd444", "c4", "", "src", incumbent="ccc333"))
    assert lineage_text(s, 4).plain == "vs #3 ccc333 (kept by human) · baseline → #1 → #3"
    assert lineage_text(s, 3).plain == "vs #1 aaa111 (kept by human) · baseline → #1"
    assert lineage_text(s, 1).plain == "vs the baseline base00"


# -- on screen ---------------------------------------------------------------------------------
async def test_while_deciding_the_diff_has_100_columns_of_code_at_160_and_z_maximises(tmp_path: Path):
    app = make_app(tmp_path, iterations=1)
    async with app.run_test(size=SIZE) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.pause(0.1)
        diff = app.run_screen.query_one(DiffPane)
        assert app.run_screen.has_class("-deciding")
        assert diff.content_region.width - UNIFIED_GUTTER >= 100
        bench = app.run_screen.query_one(BenchPane)
        assert bench.region.x < diff.region.x  # beside the diff, below the reasoning
        diff.focus()
        await pilot.press("z")
        await pilot.pause(0.1)
        assert app.run_screen.maximized is diff and diff.region.width == SIZE[0]
        text = screen_text(app)
        assert "reasoning" not in text.splitlines()[0] and "Decide #1" in text  # the prompt stays in view
        await pilot.press("z")
        await pilot.pause(0.1)
        assert app.run_screen.maximized is None and "reasoning" in screen_text(app).splitlines()[0]
        await pilot.press("r")
        await wait_until(pilot, lambda: not app.run_screen.has_class("-deciding"), what="layout back")
        await pilot.press("q")


async def test_the_whole_candidate_opens_at_column_0(tmp_path: Path):
    # The only change is num_warps at the end of the launch line: the diff views open shifted to it.
    script = make_script_dir(tmp_path / "script", softmax_task())
    base = softmax_task().baseline_path.read_text()
    (script / "01_block2048.py").write_text(base.replace("num_warps=4", "num_warps=8"))
    app = make_app(tmp_path, iterations=1, script_dir=script)
    async with app.run_test(size=(130, 48)) as pilot:  # narrow enough that the diff opens shifted
        await wait_prompt(pilot, app, 1)
        diff = app.run_screen.query_one(DiffPane)
        diff.focus()
        await pilot.press("v")
        await pilot.pause(0.1)
        assert diff.x > 0  # split: at the change
        await pilot.press("f")
        await pilot.pause(0.1)
        assert diff.mode == "full" and diff.x == 0
        assert re.search(r"  42\+     _softmax_kernel\[", screen_text(app))  # the changed line from its first column
        await pilot.press("q")


async def test_no_flat_sparkline_without_timings(tmp_path: Path):
    task = softmax_task()
    app = make_app(tmp_path, verdicts=[verdict(task)], iterations=2, auto=True)  # interpreter: no timing
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.state.phase == "ended", 60, "end")
        await pilot.pause(0.1)
        bench = app.run_screen.query_one(BenchPane)
        assert not bench.query_one("#history").display
        bench.focus()
        await pilot.press("z")
        await pilot.pause(0.1)
        assert "timing unavailable on this machine" in screen_text(app)


async def test_history_lists_every_candidate_and_reopens_one_after_a_resume(tmp_path: Path):
    task = softmax_task()
    app = make_app(tmp_path, auto=True)  # 3 candidates: kept, reverted, rejected by a rule
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.state.phase == "ended", 60, "end")
        await pilot.press("q")
    # A new process: the session resumed from disk, nothing left of the old screen's state.
    resumed = make_app(tmp_path / "again", session=app.session, resumed=True, iterations=3,
                       script_dir=tmp_path / "script")
    async with resumed.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        await pilot.press("h")
        await wait_until(pilot, lambda: isinstance(resumed.screen, HistoryScreen) and resumed.screen.loaded,
                         what="history")
        text = screen_text(resumed)
        for it, word in ((1, "keep"), (2, "revert"), (3, "rejected at static: no-torch-fallback")):
            assert f"  {it}  " in text and word in text
        assert "1.18 1.18 1.18 1.18" in text and "0.97 0.97 0.97 0.97" in text
        steps = resumed.screen.steps
        assert history_row(steps[0])[5:7] == ("keep", "auto")
        await pilot.press("up", "enter")  # #2 (the cursor opens on the newest)
        await wait_until(pilot, lambda: isinstance(resumed.screen, CandidateScreen), what="candidate")
        await pilot.pause(0.2)
        text = screen_text(resumed)
        # Against the incumbent it was measured against (#1's keep), not today's best.
        assert "vs #1" in text and "num_warps=8" in text and "num_warps=2" in text
        assert "decided REVERT by auto" in text and "Second try" in text and "read-only" in text
        await pilot.press("k", "r")  # nothing decides here
        assert not [r for r in resumed.session.journal.read() if r.get("kind") == "Decision" and r["iteration"] > 3]
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(resumed.screen, HistoryScreen) and resumed.screen.loaded,
                         what="back to the list")
        table = resumed.screen.query_one("#history-table")
        assert table.cursor_row == 1  # at the row it came from
        await pilot.press("escape")
        await wait_until(pilot, lambda: resumed.screen is resumed.run_screen, what="run screen")
        await pilot.press("q")

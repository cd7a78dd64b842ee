"""The step-profile screen (w): a cached profile is shown at once, a picked line starts an idea with
its context filled in, and the finished idea is journalled with the line it came from."""
from __future__ import annotations

from pathlib import Path

from harness.profiling.profile import Ceilings
from harness.model.step_profile import StepProfile, build_rows
from tui.screens.ideas import IdeasScreen
from tui.screens.profile import PROFILE_FILE, ProfileScreen
from harness import events as ev
from tui.testing import SESSION_ID, demo_catalog, feed, make_app, static_app
from tui_helpers import journal_kinds, wait_until

CEIL = Ceilings(4225.0, 790.0, 4.0, "measured")


def demo_profile(label: str) -> StepProfile:
    costs = {"aten::mm": {"kind": "op", "calls": 3, "bytes": 6.0e7, "flops": 3.2e9},
             "softmax (task kernel)": {"kind": "task", "calls": 1, "bytes": 1.7e7, "flops": 0.0},
             "aten::bmm": {"kind": "op", "calls": 2, "bytes": 2.7e8, "flops": 1.1e9}}
    times = {"aten::bmm": {"kind": "op", "device_us": 96.0, "launches": 2, "kernels": ["sm90_xmma_gemm_bf16"]},
             "aten::mm": {"kind": "op", "device_us": 41.0, "launches": 3, "kernels": ["nvjet_hsh_128x64"]},
             "softmax (task kernel)": {"kind": "task", "device_us": 22.5, "launches": 1, "kernels": ["_softmax_fwd"]},
             "kernel vectorized_elementwise<4, [bf16]>": {
                 "kind": "unattributed", "device_us": 6.0, "launches": 2, "kernels": ["elementwise"]}}
    step = 171.0
    rows = build_rows(costs, times, step, CEIL)
    busy = sum(r.device_us for r in rows)
    return StepProfile("softmax", "decode step: batch 32, 32 heads (8 kv) x 128, context 4096, hidden 4096",
                       "NVIDIA H200", True, {**CEIL.__dict__}, rows, step_us=step, eager_us=224.0, graph_us=step,
                       busy_us=busy, accounted_pct=100 * busy / step, gaps_us=step - busy, graph_coverage=1.0,
                       launches=8, candidate=label,
                       kernel_shapes=[{"name": "4k x 4k", "us": 30.8, "bound": "memory", "hint": "memory-bound at 50% of copy bandwidth"},
                                      {"name": "long rows 128k", "us": 279.7, "bound": "memory", "hint": "memory-bound at 45% of copy bandwidth"}],
                       ncu={"shape": "long rows 128k", "kernel": "_softmax_fwd", "dram_pct": 46.0, "sm_pct": 21.0,
                            "occupancy_pct": 38.0, "registers": 64,
                            "top_stalls": [{"reason": "long_scoreboard", "warps_per_issue": 9.1},
                                           {"reason": "barrier", "warps_per_issue": 2.3}]})


def _seed(app) -> None:
    demo_profile(app.session.workspace.best).save(app.session.root / PROFILE_FILE)


async def test_a_picked_line_becomes_a_journalled_idea(tmp_path: Path):
    app = make_app(tmp_path, start_loop=False)
    _seed(app)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, ProfileScreen) and app.screen.profile is not None)
        assert "aten::bmm" in str(app.screen.query_one("#profile-table").get_row_at(0))
        # A kernel name with brackets is shown as written, not read as markup.
        assert any("[bf16]" in str(app.screen.query_one("#profile-table").get_row_at(i)) for i in range(4))
        await pilot.press("enter")  # the first line: aten::bmm
        await wait_until(pilot, lambda: isinstance(app.screen, IdeasScreen))
        field = app.screen.query_one("#idea-input")
        assert field.value.startswith("From the step profile (decode step") and "aten::bmm" in field.value
        assert "56% of the step" in field.value
        await pilot.press(*"fuse the two bmm with the softmax", "enter")
        await pilot.press("escape")
        await wait_until(pilot, lambda: journal_kinds(app, "IdeaFromProfile"))
        rec = journal_kinds(app, "IdeaFromProfile")[-1]
        assert rec["idea"].endswith("Idea: fuse the two bmm with the softmax")
        assert rec["row"]["name"] == "aten::bmm" and rec["measured"] and rec["device"] == "NVIDIA H200"
        await wait_until(pilot, lambda: app.state.ideas and app.state.ideas[-1] == rec["idea"])


async def test_a_task_without_a_workload_says_so(tmp_path: Path, monkeypatch):
    app = make_app(tmp_path, start_loop=False)
    monkeypatch.setattr(app.task_, "e2e", "")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("w")
        await pilot.pause(0.2)
        assert app.screen is app.run_screen


def _snap_app(tmp_path: Path):
    app = static_app(tmp_path)
    app.pack_catalog = demo_catalog(tmp_path / "packs")
    _seed(app)

    async def open_profile(pilot) -> None:
        # A fixed agent name in the status line (the app's own is the script folder's tmp path).
        await feed(app, [ev.SessionStarted(SESSION_ID, "softmax", "script:demo", [], "NVIDIA H200", False, "manual")], {})
        await pilot.press("w")
        await wait_until(pilot, lambda: isinstance(app.screen, ProfileScreen) and app.screen.profile is not None)
        await pilot.pause()

    return app, open_profile


def test_profile_screen_160(snap_compare, tmp_path):
    app, run_before = _snap_app(tmp_path)
    assert snap_compare(app, run_before=run_before, terminal_size=(160, 48))


def test_profile_screen_100(snap_compare, tmp_path):
    app, run_before = _snap_app(tmp_path)
    assert snap_compare(app, run_before=run_before, terminal_size=(100, 32))


async def test_n_makes_a_task_of_the_highlighted_op_with_its_shapes_from_the_step(tmp_path: Path):
    """`n` writes the op's call as a PyTorch file and makes the task from it, as `tasks new` would;
    a row without a recorded call (the task's own kernel) has no `n`."""
    from harness.authoring.tasks import load_task

    profile = demo_profile("x")
    bmm = next(r for r in profile.rows if r.name == "aten::bmm")
    bmm.example = {"op": "aten.bmm.default", "kwargs": {},
                   "args": [{"shape": [4, 2, 16], "dtype": "float32"}, {"shape": [4, 16, 8], "dtype": "float32"}]}
    app = static_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = ProfileScreen(lambda: profile, None, "x", task_dir=tmp_path)
        app.push_screen(screen)
        await wait_until(pilot, lambda: screen.profile is not None)
        task_row = next(i for i, r in enumerate(profile.rows) if r.kind == "task")
        screen.query_one("#profile-table").move_cursor(row=task_row)
        await pilot.pause()
        assert screen.check_action("new_task", ()) is False
        screen.query_one("#profile-table").move_cursor(row=profile.rows.index(bmm))
        await pilot.pause()
        assert screen.check_action("new_task", ()) is True
        await pilot.press("n")
        made = tmp_path / "kernels" / "bmm_4x2x16_4x16x8"
        await wait_until(pilot, lambda: "wrote" in str(screen.query_one("#profile-kernel").render()),
                         what="the task made", timeout=120)
        shown = str(screen.query_one("#profile-kernel").render())
        assert str(made) in shown and "run bmm_4x2x16_4x16x8" in shown
    t = load_task(made)
    assert t.name == "bmm_4x2x16_4x16x8" and len(t.contract.inputs) == 2
    assert (tmp_path / ".warpsmith" / "ops" / "bmm_4x2x16_4x16x8.py").is_file()
    assert "torch.ops.aten.bmm.default(x0, x1)" in (made / "reference.py").read_text()


def test_an_in_place_op_or_integer_inputs_are_refused_in_one_line(tmp_path: Path):
    import pytest

    from harness.authoring.newtask import NewTaskError
    from harness.authoring.optask import make_op_task

    with pytest.raises(NewTaskError, match="in place"):
        make_op_task({"op": "aten.add_.Scalar", "args": [{"shape": [2], "dtype": "float32"}, 1.0], "kwargs": {}},
                     "a step", tmp_path)
    with pytest.raises(NewTaskError, match="int64 tensors"):
        make_op_task({"op": "aten.index_select.default", "kwargs": {},
                      "args": [{"shape": [8, 4], "dtype": "float32"}, 0, {"shape": [3], "dtype": "int64"}]},
                     "a step", tmp_path)
    assert not (tmp_path / "kernels").exists()

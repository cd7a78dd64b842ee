"""The TUI says which hardware pack the session chose for the GPU, and why, as a notification: it
reacts to HardwarePackChosen, never to the words of a notice."""
from __future__ import annotations

from pathlib import Path

from harness import events as ev
from tui.app import LoopEvent
from tui.testing import make_app
from tui_helpers import wait_until


async def test_hardware_choice_is_notified_verbatim(tmp_path: Path):
    app = make_app(tmp_path, start_loop=False)
    chosen = ("hardware l40s: chosen for the detected GPU: 'NVIDIA L40S' is sm_89 and names L40S "
              "(CUDA compute capability 8.9) [sm_89]")
    none = "hardware: none chosen: no hardware pack applies to sm_86 ('NVIDIA GeForce RTX 3090'); pick one with --packs ID"
    async with app.run_test(size=(160, 48)) as pilot:
        app.post_message(LoopEvent(ev.HardwarePackChosen("l40s", chosen)))
        app.post_message(LoopEvent(ev.HardwarePackChosen(None, none)))
        app.post_message(LoopEvent(ev.AgentNotice(0, "info", "rules dsl-triton: named by the task")))
        # a notice worded like a choice is still only a notice
        app.post_message(LoopEvent(ev.AgentNotice(0, "info", "hardware h200: chosen, says this notice")))
        await wait_until(pilot, lambda: len(app._notifications) >= 2, what="notifications")
        await pilot.pause(0.1)
        notes = [(str(n.message), n.severity) for n in app._notifications]
        assert (chosen, "information") in notes  # brackets kept: not read as markup
        assert (none, "warning") in notes
        assert not any("dsl-triton" in m or "says this notice" in m for m, _ in notes)
        assert chosen in [b.text for b in app.state.turn(0).blocks]  # and a line in the reasoning pane

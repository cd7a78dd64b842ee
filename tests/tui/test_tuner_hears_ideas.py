"""The default agent hears you (issue 26): in the TUI, with the offline tuner proposing, the
reasoning pane says which standing ideas it took and which it can't use (and where to go for an
agent that can)."""
from __future__ import annotations

from pathlib import Path

from harness.agents.tuner import TunerAgent
from tui.testing import make_app, make_session, screen_text, softmax_task
from tui_helpers import journal_kinds, wait_until


async def test_the_tuner_says_what_it_took_from_ideas_and_what_it_cannot_use(tmp_path: Path):
    session = make_session(tmp_path, softmax_task())
    session.meta.ideas = ["more warps", "try tensor cores"]
    session.save_meta()
    app = make_app(tmp_path, session=session, iterations=1,
                   agent_factory=lambda _script: TunerAgent(session_dir=session.root))
    async with app.run_test(size=(280, 60)) as pilot:
        # The pane shows each chunk as it streams; the journal gets the whole text once the proposal
        # stream ends (Loop.stream_proposal), a moment later: wait for both.
        await wait_until(pilot, lambda: "Can't use" in screen_text(app) and journal_kinds(app, "Reasoning"),
                         timeout=120, what="the tuner's answer to the ideas in the reasoning pane and the journal")
        # The pane wraps the line; what it renders is the journal's Reasoning text, word for word.
        text = "".join(r["text"] for r in journal_kinds(app, "Reasoning"))
        assert "taken: idea 'more warps'" in text
        assert "Can't use: idea 'try tensor cores'" in text and "press m" in text
        await pilot.press("q")

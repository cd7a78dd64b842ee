"""The reasoning pane follows the stream: short content starts at the top, long content keeps the
newest text in view until the person scrolls up, and End brings the following back."""
from __future__ import annotations

from textual.app import App, ComposeResult

from tui.state import Block, RunState, Turn
from tui.widgets.reasoning import ReasoningPane
from tui_helpers import wait_settled


class PaneApp(App):
    def __init__(self) -> None:
        super().__init__()
        self.state = RunState()

    def compose(self) -> ComposeResult:
        yield ReasoningPane()

    async def add_note(self, text: str) -> None:
        if not self.state.turns:
            self.state.turns.append(Turn(1))
        self.state.turns[0].blocks.append(Block("note", text))
        await self.query_one(ReasoningPane).sync(self.state)


async def test_a_short_turn_starts_at_the_top_of_the_pane():
    app = PaneApp()
    async with app.run_test(size=(60, 30)) as pilot:
        await app.add_note("only a few lines")
        pane = app.query_one(ReasoningPane)
        await wait_settled(pilot, pane)
        assert pane.scroll_y == 0 and not pane.is_anchored
        header = pane.children[0]
        assert header.region.y == pane.content_region.y  # no void above the first line


async def test_long_content_follows_the_stream_until_the_person_scrolls_up():
    app = PaneApp()
    async with app.run_test(size=(60, 30)) as pilot:
        pane = app.query_one(ReasoningPane)
        for i in range(40):
            await app.add_note(f"note {i}")
        await wait_settled(pilot, pane)
        assert pane.max_scroll_y > 0 and pane.scroll_y == pane.max_scroll_y

        pane.scroll_to(y=0, animate=False)  # the person reads back
        await wait_settled(pilot, pane)
        for i in range(5):
            await app.add_note(f"later note {i}")
        await wait_settled(pilot, pane)
        assert pane.scroll_y == 0  # not dragged away from what they read

        pane.focus()
        await pilot.press("end")
        await wait_settled(pilot, pane)
        for i in range(5):
            await app.add_note(f"newest note {i}")
        await wait_settled(pilot, pane)
        assert pane.scroll_y == pane.max_scroll_y  # following again

"""Reasoning pane: the agent's streamed reasoning and messages, notices, rule hits and decisions.

Each text block is a `Markdown` fed through a `MarkdownStream`, which coalesces fragments when
rendering falls behind (hundreds of tokens per second). The pane is anchored: it follows the
stream until the person scrolls up, and re-anchors when they scroll back to the bottom. Only the
last few turns stay on screen; the full transcript is in the session journal.
"""
from __future__ import annotations

from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tui.state import Block, RunState, Turn


class ReasoningPane(VerticalScroll):
    DEFAULT_CLASSES = "pane"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "reasoning"
        # id(block) -> (widget, stream or None, characters already written)
        self._blocks: dict[int, tuple[Widget, MarkdownStream | None, int]] = {}
        self._turns: dict[int, Widget] = {}  # id(turn) -> its header
        self._pruned_shown = -1

    def on_mount(self) -> None:
        self.anchor()

    async def sync(self, state: RunState) -> None:
        """Bring the pane up to date with `state`: mount new blocks, stream new text, prune."""
        live_turns = {id(t) for t in state.turns}
        live_blocks = {id(b) for t in state.turns for b in t.blocks}
        for key in [k for k in self._blocks if k not in live_blocks]:
            widget, stream, _ = self._blocks.pop(key)
            if stream is not None:
                await stream.stop()
            await widget.remove()
        for key in [k for k in self._turns if k not in live_turns]:
            await self._turns.pop(key).remove()
        if state.pruned_turns != self._pruned_shown:
            self._pruned_shown = state.pruned_turns
            if state.pruned_turns:
                await self._pruned_notice(state.pruned_turns)
        new: list[Widget] = []
        for turn in state.turns:
            if id(turn) not in self._turns:
                title = f"iteration {turn.iteration}" if turn.iteration else "session"
                header = Static(f"── {title} ──", classes="turn-header")
                self._turns[id(turn)] = header
                new.append(header)
            for block in turn.blocks:
                entry = self._blocks.get(id(block))
                if entry is None:
                    widget = self._widget_for(block)
                    self._blocks[id(block)] = (widget, None, 0)
                    new.append(widget)
        if new:
            await self.mount_all(new)
        for turn in state.turns:
            for block in turn.blocks:
                await self._write(block)

    async def _pruned_notice(self, n: int) -> None:
        for old in self.query(".pruned"):
            await old.remove()
        await self.mount(Static(f"{n} earlier iteration(s) hidden: the session journal has them all",
                                classes="pruned"), before=0 if self.children else None)

    def _widget_for(self, block: Block) -> Widget:
        if block.kind == "note":
            return Markdown(block.text, classes=f"note -{block.level}")
        return Markdown("", classes=f"stream -{block.kind}")

    async def _write(self, block: Block) -> None:
        widget, stream, done = self._blocks[id(block)]
        if block.kind == "note" or len(block.text) == done:
            return
        if stream is None:
            stream = Markdown.get_stream(widget)  # type: ignore[arg-type]
        await stream.write(block.text[done:])
        self._blocks[id(block)] = (widget, stream, len(block.text))

    async def flush(self) -> None:
        """Stop the streams so that all written text is rendered (tests, snapshots, quitting)."""
        for key, (widget, stream, done) in list(self._blocks.items()):
            if stream is not None:
                await stream.stop()
                self._blocks[key] = (widget, None, done)


def turn_text(turn: Turn) -> str:
    return "\n\n".join(b.text for b in turn.blocks)

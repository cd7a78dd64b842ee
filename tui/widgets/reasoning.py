"""Reasoning pane: the agent's streamed reasoning and messages, notices, rule hits and decisions.

Each text block is a `Markdown` fed through a `MarkdownStream`, which coalesces fragments when
rendering falls behind (hundreds of tokens per second). Once its content overflows, the pane is
anchored: it follows the stream until the person scrolls up, and again after End (or a scroll back
to the very bottom). Only the last few turns stay on screen; the full transcript is in the
session journal.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from rich.markdown import Markdown as RichMarkdown
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Markdown, Static
from textual.widgets.markdown import MarkdownStream

from tui.state import Block, RunState, Turn


SEAL_CHARS = 3000  # a live Markdown widget longer than this is frozen into one Static


@dataclass
class BlockView:
    """A block on screen: frozen parts (one Static each) and the live Markdown tail."""

    live: Markdown
    stream: MarkdownStream | None = None
    live_start: int = 0  # where in block.text the live widget starts
    done: int = 0  # characters of block.text written so far
    sealed: list[Widget] = field(default_factory=list)


def seal_point(text: str, start: int, end: int) -> int | None:
    """A paragraph break in text[start:end] to freeze up to, outside any code fence."""
    cut = text.rfind("\n\n", start, end)
    if cut <= start or cut - start < SEAL_CHARS // 2 or text.count("```", start, cut) % 2:
        return None
    return cut + 2


class ReasoningPane(VerticalScroll):
    DEFAULT_CLASSES = "pane"
    ALLOW_MAXIMIZE = True  # z (scrolling containers default to False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "reasoning"
        self._blocks: dict[int, BlockView] = {}
        self._turns: dict[int, Widget] = {}  # id(turn) -> its header
        self._pruned_shown = -1

    def watch_virtual_size(self, size: Size) -> None:
        # Textual 8.2.8 anchors a pane whose content is shorter than it at a negative scroll
        # offset: the first turns would hug the bottom edge below a void (Textual issue #6652).
        # So follow the stream (anchor) only once the content overflows, and let go again if
        # pruning makes it fit.
        overflowing = size.height > self.scrollable_content_region.height
        if overflowing and not self.is_anchored:
            self.anchor()
        elif not overflowing and self.is_anchored:
            self.anchor(False)
            self.scroll_to(y=0, animate=False)

    async def sync(self, state: RunState) -> None:
        """Bring the pane up to date with `state`: mount new blocks, stream new text, prune."""
        live_turns = {id(t) for t in state.turns}
        live_blocks = {id(b) for t in state.turns for b in t.blocks}
        for key in [k for k in self._blocks if k not in live_blocks]:
            view = self._blocks.pop(key)
            if view.stream is not None:
                await view.stream.stop()
            await self.remove_children(view.sealed + [view.live])
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
                if id(block) not in self._blocks:
                    widget = self._widget_for(block)
                    self._blocks[id(block)] = BlockView(widget)
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

    def _widget_for(self, block: Block) -> Markdown:
        if block.kind == "note":
            return Markdown(block.text, classes=f"note -{block.level}")
        return Markdown("", classes=f"stream -{block.kind}")

    async def _write(self, block: Block) -> None:
        view = self._blocks[id(block)]
        if block.kind == "note" or len(block.text) == view.done:
            return
        if view.stream is None:
            view.stream = Markdown.get_stream(view.live)
        await view.stream.write(block.text[view.done:])
        view.done = len(block.text)
        if view.done - view.live_start > SEAL_CHARS:
            await self._seal(view, block.text, block.kind)

    async def _seal(self, view: BlockView, text: str, kind: str) -> None:
        """Freeze the live widget's older paragraphs into one Static: a Markdown widget holds a
        child widget per paragraph, and frame time grows with their number (measured with
        bench/tui_latency.py), so a long turn would slow every keystroke."""
        cut = seal_point(text, view.live_start, view.done)
        if cut is None:
            return
        if view.stream is not None:
            await view.stream.stop()
            view.stream = None
        frozen = Static(RichMarkdown(text[view.live_start:cut], code_theme="monokai"),
                        classes=f"sealed -{kind}")
        frozen.source = text[view.live_start:cut]  # type: ignore[attr-defined]  # for tests
        view.sealed.append(frozen)
        await self.mount(frozen, before=view.live)
        await view.live.update(text[cut:view.done])
        view.live_start = cut

    async def flush(self) -> None:
        """Stop the streams so that all written text is rendered (tests, snapshots, quitting)."""
        for view in self._blocks.values():
            if view.stream is not None:
                await view.stream.stop()
                view.stream = None


def turn_text(turn: Turn) -> str:
    return "\n\n".join(b.text for b in turn.blocks)

"""The keys that apply now, under the status line, on a second line when one does not hold them all.

Textual's Footer is one line that cuts what does not fit: at 100 columns while deciding it showed
`a aut▏^p palette`, hiding space, p, z and h. This bar shows the same keys (the screen's bindings that
are shown and apply now: a binding its screen's check_action hides is not here either), in the same
order, and breaks a line only between two keys, never inside one. It takes at most MAX_LINES lines;
keys beyond them are left out, the command palette's key always last (ctrl+p lists every action).
A click on a key presses it, as on the Footer.
"""
from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.widget import Widget

MAX_LINES = 2
GAP = 2  # columns between two keys


@dataclass(frozen=True)
class Key:
    key: str  # what pressing it simulates (the binding's first key)
    display: str  # how it is shown: "?", "space", "^p"
    description: str

    @property
    def width(self) -> int:
        return len(self.display) + 1 + len(self.description)


def lay_out(keys: list[Key], width: int, max_lines: int = MAX_LINES) -> list[list[Key]]:
    """Keys in lines of at most `width` cells, a break only between two keys. The last key (the
    palette's) always shows: when they need more than `max_lines` lines, keys before it are dropped
    from the end until it fits."""
    def flow(ks: list[Key]) -> list[list[Key]]:
        lines: list[list[Key]] = [[]]
        used = 0
        for k in ks:
            need = k.width + (GAP if lines[-1] else 0)
            if lines[-1] and used + need > width:
                lines.append([])
                used, need = 0, k.width
            lines[-1].append(k)
            used += need
        return lines

    shown = list(keys)
    lines = flow(shown)
    while len(lines) > max_lines and len(shown) > 1:
        del shown[-2]  # the last before the palette's
        lines = flow(shown)
    return lines


class KeysBar(Widget):
    COMPONENT_CLASSES = {"keys-bar--key", "keys-bar--description"}

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._spans: list[tuple[int, int, int, str]] = []  # (line, start, end, key) of each key drawn

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen) -> None:
        self.refresh(layout=True)  # the number of lines may change with the keys

    def keys(self) -> list[Key]:
        """The bindings the Footer would show, one per action, then the command palette's."""
        app = self.app
        active = self.screen.active_bindings
        out: list[Key] = []
        seen: set[str] = set()
        for _, binding, enabled, _ in active.values():
            if not binding.show or not enabled or binding.action in seen:
                continue
            seen.add(binding.action)
            out.append(Key(binding.key.split(",")[0], app.get_key_display(binding), binding.description))
        palette = active.get(app.COMMAND_PALETTE_BINDING) if app.ENABLE_COMMAND_PALETTE else None
        if palette is not None:
            out.append(Key(palette.binding.key, app.get_key_display(palette.binding), palette.binding.description))
        return out

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(lay_out(self.keys(), width)) if width > 0 else 1

    def render(self) -> Text:
        key_style = self.get_component_rich_style("keys-bar--key")
        desc_style = self.get_component_rich_style("keys-bar--description")
        text = Text(no_wrap=True, overflow="crop")
        self._spans = []
        for n, line in enumerate(lay_out(self.keys(), self.size.width)):
            if n:
                text.append("\n")
            x = 0
            for i, k in enumerate(line):
                if i:
                    text.append(" " * GAP)
                    x += GAP
                self._spans.append((n, x, x + k.width, k.key))
                text.append(k.display, key_style)
                text.append(" " + k.description, desc_style)
                x += k.width
        return text

    def on_click(self, event: events.Click) -> None:
        for line, start, end, key in self._spans:
            if event.y == line and start <= event.x < end:
                self.app.simulate_key(key)
                return

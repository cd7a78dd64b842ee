"""Diff pane: the candidate against the current best, unified or split, or the whole candidate.

Rendering is a few pure functions over difflib opcodes (tested without a screen); the widget
only picks the mode. Rule violations carry candidate line numbers, so they are marked on the
candidate side ("!" in the gutter, the rule and message under the line).
"""
from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from itertools import zip_longest

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.style import Style
from rich.table import Table
from rich.text import Span, Text
from textual.containers import ScrollableContainer
from textual.reactive import reactive
from textual.widgets import Static

from tui.state import CandidateView

MODES = ("unified", "split", "full")
SYNTAX_THEME = "monokai"  # truecolor or 256: Textual downsamples for the terminal (tmux, TEXTUAL_COLOR_SYSTEM)
ADD_BG, DEL_BG, MARK = "on #12361d", "on #3d1414", "bold red"


@dataclass
class Rendered:
    """A view of a candidate with its size, so the pane never has to measure it by rendering
    (Textual re-measures auto-sized widgets on every layout pass: each streamed chunk)."""

    renderable: RenderableType
    width: int | None  # None: as wide as the pane
    height: int
    first_mark: int | None = None  # line of the first violation message, to scroll to


def _rendered_lines(lines: list[Text]) -> Rendered:
    first = next((i for i, t in enumerate(lines) if t.style == MARK), None)
    return Rendered(Group(*_no_wrap(lines)), max((t.cell_len for t in lines), default=1), len(lines), first)


@dataclass
class Row:
    """One rendered line of a unified diff."""

    tag: str  # " " context | "-" removed | "+" added | "@" hunk header
    old_no: int | None
    new_no: int | None
    text: str


@functools.lru_cache(maxsize=8)
def highlight_lines(source: str) -> tuple[Text, ...]:
    """Highlighted lines, cached: toggling views re-renders without re-lexing (callers copy)."""
    if not source:
        return ()
    text = Syntax(source, "python", theme=SYNTAX_THEME, background_color="default").highlight(source)
    text.rstrip()
    # Token colours only: the theme's backgrounds would patch the pane and hide the +/- bands.
    plain = []
    for sp in text.spans:
        st = sp.style if isinstance(sp.style, Style) else Style.parse(sp.style)
        plain.append(Span(sp.start, sp.end, Style(color=st.color, bold=st.bold, italic=st.italic)))
    text.spans = plain
    text.style = ""
    return tuple(text.split("\n", allow_blank=True))


def unified_rows(old: str, new: str, context: int = 3) -> list[Row]:
    a, b = old.splitlines(), new.splitlines()
    rows: list[Row] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        i1, j1 = group[0][1], group[0][3]
        i2, j2 = group[-1][2], group[-1][4]
        rows.append(Row("@", None, None, f"@@ -{i1 + 1},{i2 - i1} +{j1 + 1},{j2 - j1} @@"))
        for tag, a1, a2, b1, b2 in group:
            if tag == "equal":
                rows += [Row(" ", a1 + k + 1, b1 + k + 1, a[a1 + k]) for k in range(a2 - a1)]
                continue
            rows += [Row("-", k + 1, None, a[k]) for k in range(a1, a2)]
            rows += [Row("+", None, k + 1, b[k]) for k in range(b1, b2)]
    return rows


def split_pairs(old: str, new: str) -> list[tuple[int | None, int | None]]:
    """Aligned (old line no, new line no) pairs for a side-by-side view; None = blank side."""
    a, b = old.splitlines(), new.splitlines()
    pairs: list[tuple[int | None, int | None]] = []
    for tag, a1, a2, b1, b2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            pairs += [(a1 + k + 1, b1 + k + 1) for k in range(a2 - a1)]
        else:
            pairs += list(zip_longest(range(a1 + 1, a2 + 1), range(b1 + 1, b2 + 1)))
    return pairs


def violations_by_line(violations: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = {}
    for v in violations:
        line = v.get("line")
        out.setdefault(int(line) if isinstance(line, int) else 0, []).append(v)
    return out


def _marks(v_lines: dict[int, list[dict]], line: int | None, indent: int) -> list[Text]:
    return [Text(" " * indent + f"^ {v.get('rule')}: {v.get('message')}", style=MARK)
            for v in v_lines.get(line or -1, [])]


def _no_wrap(lines: list[Text]) -> list[Text]:
    # Long kernel lines scroll sideways instead of wrapping, so columns stay aligned.
    for t in lines:
        t.no_wrap, t.overflow = True, "ignore"
    return lines


def _no(n: int | None) -> str:
    return f"{n:>4}" if n is not None else "    "


def render_unified(c: CandidateView) -> Rendered:
    old_hl, new_hl = highlight_lines(c.old), highlight_lines(c.new)
    v_lines = violations_by_line(c.violations)
    rows = unified_rows(c.old, c.new)
    out: list[Text] = [Text(f"--- best   +++ candidate #{c.iteration} {c.commit[:10]}: {c.description}",
                            style="bold")]
    shown_new = {r.new_no for r in rows if r.new_no is not None}
    unmarked = [v for n, vs in v_lines.items() if n not in shown_new for v in vs]
    for v in unmarked:
        where = f"line {v.get('line')}" if v.get("line") else "file"
        out.append(Text(f"! {where}: {v.get('rule')}: {v.get('message')}", style=MARK))
    if not rows:
        out.append(Text("(no change against the best)", style="dim"))
    for r in rows:
        if r.tag == "@":
            out.append(Text(r.text, style="cyan dim"))
            continue
        if r.tag == "-":
            code = old_hl[r.old_no - 1].copy() if r.old_no and r.old_no <= len(old_hl) else Text(r.text)
        else:
            code = new_hl[r.new_no - 1].copy() if r.new_no and r.new_no <= len(new_hl) else Text(r.text)
        flagged = r.new_no in v_lines if r.new_no else False
        line = Text.assemble((f"{_no(r.old_no)} {_no(r.new_no)} ", "dim"),
                             ("!" if flagged else r.tag, MARK if flagged else
                              {"+": "green", "-": "red"}.get(r.tag, "dim")), " ")
        line.append_text(code)
        if r.tag in "+-":
            line.stylize(ADD_BG if r.tag == "+" else DEL_BG)
        out.append(line)
        if r.tag != "-":
            out += _marks(v_lines, r.new_no, 12)
    return _rendered_lines(out)


def render_split(c: CandidateView) -> Rendered:
    """Side by side, each side cropped to half the pane (unified and full views scroll sideways)."""
    old_hl, new_hl = highlight_lines(c.old), highlight_lines(c.new)
    v_lines = violations_by_line(c.violations)
    table = Table(box=None, expand=True, show_header=True, header_style="bold", pad_edge=False,
                  padding=(0, 1))
    table.add_column("best", ratio=1, overflow="crop", no_wrap=True)
    table.add_column(f"candidate #{c.iteration}", ratio=1, overflow="crop", no_wrap=True)
    height, first = 1, None
    for o, n in split_pairs(c.old, c.new):
        changed = o is None or n is None or c.old.splitlines()[o - 1] != c.new.splitlines()[n - 1]
        left = Text(f"{_no(o)} ", style="dim")
        if o is not None:
            left.append_text(old_hl[o - 1] if o <= len(old_hl) else Text(""))
            if changed:
                left.stylize(DEL_BG)
        right = Text(f"{_no(n)} ", style="dim")
        if n is not None:
            flagged = n in v_lines
            if flagged:
                right = Text.assemble((f"{n:>4}", MARK), ("!", MARK))
            right.append_text(new_hl[n - 1] if n <= len(new_hl) else Text(""))
            if changed:
                right.stylize(ADD_BG)
            for m in _marks(v_lines, n, 5):
                right.append("\n")
                right.append_text(m)
                first = height + 1 if first is None else first
                height += 1
        table.add_row(left, right)
        height += 1
    return Rendered(table, None, height, first)


def render_full(c: CandidateView) -> Rendered:
    v_lines = violations_by_line(c.violations)
    out: list[Text] = [Text(f"candidate #{c.iteration} {c.commit[:10]}: {c.description}", style="bold")]
    for v in v_lines.get(0, []):
        out.append(Text(f"! file: {v.get('rule')}: {v.get('message')}", style=MARK))
    for n, code in enumerate(highlight_lines(c.new), 1):
        flagged = n in v_lines
        line = Text.assemble((f"{n:>4}", "dim"), ("!" if flagged else " ", MARK), " ")
        line.append_text(code)
        out.append(line)
        out += _marks(v_lines, n, 6)
    return _rendered_lines(out)


RENDERERS = {"unified": render_unified, "split": render_split, "full": render_full}


class DiffPane(ScrollableContainer, can_focus=True):
    """Scrolls both ways: long kernel lines are never cut off, only scrolled to."""

    DEFAULT_CLASSES = "pane"
    mode: reactive[str] = reactive("unified")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.candidate: CandidateView | None = None
        self.border_title = "diff"

    def compose(self):
        yield Static(Text("waiting for the first candidate…", style="dim"), id="diff-body")

    def show(self, candidate: CandidateView | None) -> None:
        self.candidate = candidate
        self._render_body()

    def watch_mode(self, mode: str) -> None:
        self._render_body()

    def _render_body(self) -> None:
        if not self.is_mounted:
            return
        body = self.query_one("#diff-body", Static)
        self.border_title = f"diff · {self.mode}"
        self.set_class(self.mode == "split", "-split")
        if self.candidate is None:
            body.styles.width, body.styles.height = "1fr", 1
            body.update(Text("waiting for the first candidate…", style="dim"))
            return
        view = RENDERERS[self.mode](self.candidate)
        # Explicit size: wider than the pane scrolls sideways (Textual caps a measured width at
        # the container's), and a known height is never re-measured by rendering.
        body.styles.width = view.width if view.width is not None else "1fr"
        body.styles.height = view.height
        body.update(view.renderable)
        if view.first_mark is not None:
            # Bring the first rule violation into view: it is why the candidate was rejected.
            self.call_after_refresh(self.scroll_to, y=max(0, view.first_mark - 4), animate=False)

    def on_mount(self) -> None:
        self._render_body()

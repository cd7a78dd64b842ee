"""Diff pane: the candidate against the current best, unified or split, or the whole candidate.

Rendering is a few pure functions over difflib opcodes (tested without a screen); the widget
only picks the mode and the sideways position. Rule violations carry candidate line numbers, so
they are marked on the candidate side ("!" in the gutter, the rule and message under the line).
Changed lines carry a character, not only a colour ("-"/"+"), and the characters that differ
inside a changed line are underlined.

Sideways: unified and full views are as wide as their longest line and scroll; the split view
gives each side half the pane and shifts both sides together. Left/Right move SIDE_STEP
columns, shift+Left/shift+Right go to the line start/end, and a new candidate (or view) opens
at its first change, or at its first rule violation (the whole candidate at column 0).
"""
from __future__ import annotations

import difflib
import functools
import textwrap
from dataclasses import dataclass
from itertools import zip_longest

from rich.console import Group, RenderableType
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Span, Text
from textual import events
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.reactive import reactive
from textual.widgets import Static

from harness.evaluate.records import Finding
from tui.state import CandidateView

MODES = ("unified", "split", "full")
SYNTAX_THEME = "monokai"  # truecolor or 256: Textual downsamples for the terminal (tmux, TEXTUAL_COLOR_SYSTEM)
ADD_BG, DEL_BG, MARK = "on #12361d", "on #3d1414", "bold red"
CHANGED = "bold underline"  # the characters that differ inside a changed line
SIDE_STEP = 8  # columns per Left/Right press
UNIFIED_GUTTER = 12  # "  11   11 + "
FULL_GUTTER = 6  # "  11+ "
SEP = "│"


@dataclass
class Row:
    """One rendered line of a unified diff."""

    tag: str  # " " context | "-" removed | "+" added | "@" hunk header
    old_no: int | None
    new_no: int | None
    text: str


@dataclass
class Change:
    """The first change between two sources: its line on each side (None: no such line on that
    side) and the columns [start, end) of the displayed line that differ."""

    old_no: int | None
    new_no: int | None
    start: int
    end: int


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


def _opcodes(a: list[str], b: list[str]):
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


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
    for tag, a1, a2, b1, b2 in _opcodes(a, b):
        if tag == "equal":
            pairs += [(a1 + k + 1, b1 + k + 1) for k in range(a2 - a1)]
        else:
            pairs += list(zip_longest(range(a1 + 1, a2 + 1), range(b1 + 1, b2 + 1)))
    return pairs


def changed_spans(a: str, b: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The columns [start, end) that differ, in `a` and in `b`: the common prefix and suffix
    left out ("num_warps=4)" vs "num_warps=2)": only the digit)."""
    n = min(len(a), len(b))
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    s = 0
    while s < n - p and a[-1 - s] == b[-1 - s]:
        s += 1
    return (p, len(a) - s), (p, len(b) - s)


def replaced_partners(old: str, new: str) -> tuple[dict[int, int], dict[int, int]]:
    """Replaced lines paired in order: {old no: new no} and {new no: old no}."""
    o2n: dict[int, int] = {}
    for tag, a1, a2, b1, b2 in _opcodes(old.splitlines(), new.splitlines()):
        if tag == "replace":
            for i, j in zip(range(a1 + 1, a2 + 1), range(b1 + 1, b2 + 1)):
                o2n[i] = j
    return o2n, {j: i for i, j in o2n.items()}


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def first_change(old: str, new: str) -> Change | None:
    """Where the first changed line differs (None: the sources are the same line for line)."""
    a, b = old.splitlines(), new.splitlines()
    for tag, a1, a2, b1, b2 in _opcodes(a, b):
        if tag == "equal":
            continue
        if tag == "replace":
            _, (s, e) = changed_spans(a[a1], b[b1])
            return Change(a1 + 1, b1 + 1, s, max(e, s + 1))
        if tag == "insert":
            return Change(None, b1 + 1, _indent(b[b1]), max(len(b[b1]), _indent(b[b1]) + 1))
        return Change(a1 + 1, None, _indent(a[a1]), max(len(a[a1]), _indent(a[a1]) + 1))
    return None


def sideways_offset(start: int, end: int, width: int) -> int:
    """How far to shift a `width`-wide view so that the changed columns [start, end) show: not at
    all while the change starts well inside the view (line numbers and indentation stay), else
    with the change near the right edge, as much of the line before it in view as fits."""
    if width <= 0 or end <= width or start + min(end - start, width // 3) <= width:
        return 0
    x = end + min(4, width // 4) - width
    return max(0, min(x, start - 1))  # column x shows "…": the change starts after it


def violations_by_line(violations: list[Finding]) -> dict[int, list[Finding]]:
    out: dict[int, list[Finding]] = {}
    for v in violations:
        out.setdefault(int(v.line) if isinstance(v.line, int) else 0, []).append(v)
    return out


def _wrapped(text: str, indent: int, width: int | None, style: str) -> list[Text]:
    """`text` at `indent`, wrapped to `width` (None: one line, as long as it is)."""
    if width is None or width - indent < 16:
        return [Text(" " * indent + text, style=style)]
    parts = textwrap.wrap(text, width - indent, subsequent_indent="  ") or [text]
    return [Text(" " * indent + p, style=style) for p in parts]


def _marks(v_lines: dict[int, list[Finding]], line: int | None, indent: int, width: int | None = None) -> list[Text]:
    return [m for v in v_lines.get(line or -1, [])
            for m in _wrapped(f"^ {v.rule}: {v.message}", indent, width, MARK)]


def _no_wrap(lines: list[Text]) -> list[Text]:
    # Long kernel lines are shifted sideways (the gutter stays), never wrapped: columns stay aligned.
    for t in lines:
        t.no_wrap, t.overflow = True, "ignore"
    return lines


def _no(n: int | None) -> str:
    return f"{n:>4}" if n is not None else "    "


def _code(hl: tuple[Text, ...], plain: list[str], n: int) -> Text:
    return hl[n - 1].copy() if n <= len(hl) else Text(plain[n - 1] if n <= len(plain) else "")


def _shift(code: Text, x: int, width: int | None) -> Text:
    """The code from column `x`, at most `width` cells: "…" where a part is hidden, at either end."""
    if width is not None and width <= 0:
        return Text("")
    shown = code[x:] if x < len(code) else Text("")
    if x > 0 and code.plain[:x].strip():
        rest = shown[1:] if len(shown) else shown
        shown = Text("…", style="dim", end="")
        shown.append_text(rest)
    if width is not None and shown.cell_len > width:
        shown.truncate(width, overflow="ellipsis")
    return shown


def _title(text: str, width: int | None) -> Text:
    t = Text(text, style="bold")
    if width is not None:
        t.truncate(width, overflow="ellipsis")
    return t


@dataclass
class Rendered:
    """A view of a candidate with its size, so the pane never has to measure it by rendering
    (Textual re-measures auto-sized widgets on every layout pass: each streamed chunk)."""

    renderable: RenderableType
    width: int | None  # None: as wide as the pane
    height: int
    first_mark: int | None = None  # line of the first violation message, to scroll to
    focus: int | None = None  # line of the first change, to scroll to
    longest: int = 0  # the longest code line, in cells
    code_width: int | None = None  # code columns shown (None: all of every line)

    @property
    def max_x(self) -> int:
        """The largest sideways shift that still shows the end of the longest line."""
        if self.code_width is None or self.longest <= self.code_width:
            return 0
        return self.longest - self.code_width + 1


def _rendered_lines(lines: list[Text], width: int | None, focus: int | None, longest: int,
                    code_width: int | None) -> Rendered:
    first = next((i for i, t in enumerate(lines) if t.style == MARK), None)
    return Rendered(Group(*_no_wrap(lines)), None if width is not None else max((t.cell_len for t in lines), default=1),
                    len(lines), first, focus, longest, code_width)


def split_digits(c: CandidateView) -> int:
    """Line-number digits in the split view: every column counts when a side is a sixth of the screen."""
    return len(str(max(len(c.old.splitlines()), len(c.new.splitlines()), 1)))


def split_code_width(width: int, digits: int = 4) -> int:
    """Code columns on each side of a `width`-wide split view (the right side's: it is the wider);
    each side's gutter is the line number, the mark and a space."""
    return max(0, width - 1 - (width - 1) // 2 - digits - 2)


def code_width(mode: str, c: CandidateView, width: int) -> int:
    """The code columns a `width`-wide pane shows in `mode` (the rest is the gutter)."""
    if mode == "split":
        return split_code_width(width, split_digits(c))
    return max(0, width - (UNIFIED_GUTTER if mode == "unified" else FULL_GUTTER))


def render_unified(c: CandidateView, width: int | None = None, x: int = 0) -> Rendered:
    """The hunks, best then candidate; with `width`, the code is shifted `x` columns and cropped
    (the gutter with its line numbers and -/+ stays), otherwise every line is whole."""
    old_hl, new_hl = highlight_lines(c.old), highlight_lines(c.new)
    a, b = c.old.splitlines(), c.new.splitlines()
    o2n, n2o = replaced_partners(c.old, c.new)
    v_lines = violations_by_line(c.violations)
    rows = unified_rows(c.old, c.new)
    change = first_change(c.old, c.new)
    cw = None if width is None else max(0, width - UNIFIED_GUTTER)
    focus, longest = None, 0
    out: list[Text] = [_title(f"--- best   +++ candidate #{c.iteration} {c.commit[:10]}: {c.description}", width)]
    shown_new = {r.new_no for r in rows if r.new_no is not None}
    unmarked = [v for n, vs in v_lines.items() if n not in shown_new for v in vs]
    # Off the hunks: one entry per rule (its lines listed), so ten hits of one rule don't push
    # the change itself off the screen.
    by_rule: dict[tuple[str, str], list[int]] = {}
    for v in unmarked:
        by_rule.setdefault((str(v.rule), str(v.message)), []).append(v.line or 0)
    for (rule, message), lines in by_rule.items():
        nums = sorted({n for n in lines if n})
        where = ("line" if len(nums) == 1 else "lines") + " " + ", ".join(map(str, nums[:6])) \
            + (f" (+{len(nums) - 6})" if len(nums) > 6 else "") if nums else "file"
        out += _wrapped(f"! {where}: {rule}: {message}", 0, width, MARK)
    if not rows:
        out.append(Text("(no change against the best)", style="dim"))
    for r in rows:
        if r.tag == "@":
            out.append(Text(r.text, style="cyan dim"))
            continue
        if r.tag == "-":
            code = old_hl[r.old_no - 1].copy() if r.old_no and r.old_no <= len(old_hl) else Text(r.text)
            if r.old_no in o2n:
                code.stylize(CHANGED, *changed_spans(a[r.old_no - 1], b[o2n[r.old_no] - 1])[0])
        else:
            code = new_hl[r.new_no - 1].copy() if r.new_no and r.new_no <= len(new_hl) else Text(r.text)
            if r.tag == "+" and r.new_no in n2o:
                code.stylize(CHANGED, *changed_spans(a[n2o[r.new_no] - 1], b[r.new_no - 1])[1])
        longest = max(longest, code.cell_len)
        flagged = r.new_no in v_lines if r.new_no else False
        line = Text.assemble((f"{_no(r.old_no)} {_no(r.new_no)} ", "dim"),
                             ("!" if flagged else r.tag, MARK if flagged else
                              {"+": "green", "-": "red"}.get(r.tag, "dim")), " ")
        line.append_text(_shift(code, x, cw))
        if r.tag in "+-":
            line.stylize(ADD_BG if r.tag == "+" else DEL_BG)
        if focus is None and change is not None and (
                (r.tag == "+" and r.new_no == change.new_no)
                or (r.tag == "-" and change.new_no is None and r.old_no == change.old_no)):
            focus = len(out)
        out.append(line)
        if r.tag != "-":
            out += _marks(v_lines, r.new_no, 12, width)
    return _rendered_lines(out, width, focus, longest, cw)


def _side(code: Text | None, no: int | None, tag: str, tag_style: str, bg: str | None, width: int,
          x: int, digits: int) -> Text:
    """One side of a split row, exactly `width` cells: gutter, then the code from column x."""
    side = Text.assemble((f"{no:>{digits}}" if no is not None else " " * digits, MARK if tag == "!" else "dim"),
                         (tag, tag_style), " ")
    if code is not None:
        side.append_text(_shift(code, x, width - digits - 2))
    side.truncate(width, overflow="crop", pad=True)
    if bg is not None:
        side.stylize(bg)
    return side


def render_split(c: CandidateView, width: int = 100, x: int = 0) -> Rendered:
    """Side by side in a `width`-wide pane: each side gets half, both shifted `x` columns
    sideways together; "-" / "+" mark the changed lines, "!" a rule violation."""
    old_hl, new_hl = highlight_lines(c.old), highlight_lines(c.new)
    a, b = c.old.splitlines(), c.new.splitlines()
    v_lines = violations_by_line(c.violations)
    lw = (width - 1) // 2
    rw = width - 1 - lw
    digits = split_digits(c)
    head = _title("best" + (f" · from col {x + 1}" if x else ""), lw)
    head.truncate(lw, pad=True)
    head.append(SEP, style="dim")
    head.append_text(_title(f"candidate #{c.iteration} {c.commit[:10]}", rw))
    out: list[Text] = [head]
    for v in v_lines.get(0, []):
        out += _wrapped(f"! file: {v.rule}: {v.message}", 0, width, MARK)
    focus = None
    for o, n in split_pairs(c.old, c.new):
        changed = o is None or n is None or a[o - 1] != b[n - 1]
        if changed and focus is None:
            focus = len(out)
        old_code = _code(old_hl, a, o) if o is not None else None
        new_code = _code(new_hl, b, n) if n is not None else None
        if changed and old_code is not None and new_code is not None:
            (s1, e1), (s2, e2) = changed_spans(a[o - 1], b[n - 1])
            old_code.stylize(CHANGED, s1, e1)
            new_code.stylize(CHANGED, s2, e2)
        flagged = n is not None and n in v_lines
        row = _side(old_code, o, "-" if changed and o is not None else " ", "red",
                    DEL_BG if changed and o is not None else None, lw, x, digits)
        row.append(SEP, style="dim")
        row.append_text(_side(new_code, n, "!" if flagged else ("+" if changed and n is not None else " "),
                              MARK if flagged else "green", ADD_BG if changed and n is not None else None,
                              rw, x, digits))
        out.append(row)
        # Under the candidate's side, wrapped to it: the message is why it was rejected.
        out += _marks(v_lines, n, lw + 1 + digits, width)
    longest = max((len(s) for s in a + b), default=0)
    return _rendered_lines(out, width, focus, longest, split_code_width(width, digits))


def render_full(c: CandidateView, width: int | None = None, x: int = 0) -> Rendered:
    """The whole candidate; lines that differ from the best are marked "+" (a rule violation "!")."""
    v_lines = violations_by_line(c.violations)
    a, b = c.old.splitlines(), c.new.splitlines()
    _, n2o = replaced_partners(c.old, c.new)
    changed = {n for tag, _a1, _a2, b1, b2 in _opcodes(a, b) if tag != "equal"
               for n in range(b1 + 1, b2 + 1)} if c.old else set()
    change = first_change(c.old, c.new) if c.old else None
    cw = None if width is None else max(0, width - FULL_GUTTER)
    focus, longest = None, 0
    out: list[Text] = [_title(f"candidate #{c.iteration} {c.commit[:10]}: {c.description}", width)]
    for v in v_lines.get(0, []):
        out += _wrapped(f"! file: {v.rule}: {v.message}", 0, width, MARK)
    for n, code in enumerate(highlight_lines(c.new), 1):
        code = code.copy()
        longest = max(longest, code.cell_len)
        flagged = n in v_lines
        if n in n2o:
            code.stylize(CHANGED, *changed_spans(a[n2o[n] - 1], b[n - 1])[1])
        tag = "!" if flagged else ("+" if n in changed else " ")
        line = Text.assemble((f"{n:>4}", "dim"), (tag, MARK if flagged else "green"), " ")
        line.append_text(_shift(code, x, cw))
        if n in changed:
            line.stylize(ADD_BG)
        if change is not None and change.new_no == n:
            focus = len(out)
        out.append(line)
        out += _marks(v_lines, n, 6, width)
    return _rendered_lines(out, width, focus, longest, cw)


RENDERERS = {"unified": render_unified, "split": render_split, "full": render_full}


def _opening_key(c: CandidateView | None) -> tuple | None:
    if c is None:
        return None
    return c.commit, tuple((v.line, v.col, v.rule) for v in c.violations)


def opening_x(mode: str, c: CandidateView, width: int) -> int:
    """Where a new candidate (or view) opens sideways: at its first rule violation's column,
    else at its first change; the whole candidate (full) at column 0, where it is read from."""
    if mode == "full":
        return 0
    cw = code_width(mode, c, width)
    v = next((v for v in c.violations if isinstance(v.line, int) and isinstance(v.col, int)), None)
    if v is not None:
        start = max(0, v.col - 1)
        return sideways_offset(start, start + max(1, len(str(v.snippet or " "))), cw)
    if c.violations:
        return 0
    change = first_change(c.old, c.new) if c.old else None
    return sideways_offset(change.start, change.end, cw) if change is not None else 0


class DiffPane(ScrollableContainer, can_focus=True):
    """Scrolls up and down; sideways, the code shifts under a gutter that stays (line numbers and
    -/+ marks are always in view), in every view."""

    DEFAULT_CLASSES = "pane"
    ALLOW_MAXIMIZE = True  # z (scrolling containers default to False)
    BINDINGS = [
        Binding("left", "sideways(-1)", "scroll left", show=False),
        Binding("right", "sideways(1)", "scroll right", show=False),
        Binding("shift+left", "line_start", "line start", show=False),
        Binding("shift+right", "line_end", "line end", show=False),
    ]
    mode: reactive[str] = reactive("unified")

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.candidate: CandidateView | None = None
        self.border_title = "diff"
        self.x = 0  # the sideways shift of the code, in columns
        self.max_x = 0
        self._open_pending = False  # rendered with no size yet (a hidden tab): open it on the first resize
        self._opened_y: float | None = None  # where opening put the view, until the person scrolls
        self._shown_key: tuple | None = None  # which candidate (and violations) the view was opened for

    def compose(self):
        yield Static(Text("waiting for the first candidate…", style="dim"), id="diff-body")

    def show(self, candidate: CandidateView | None) -> None:
        """Show `candidate`. Redrawing the same one (a verdict arriving, another iteration's event
        in a parallel run) keeps the person's sideways position; a new candidate, or violations
        that arrived since, open it again at the first change or violation."""
        key = _opening_key(candidate)
        opening = key != self._shown_key
        self.candidate, self._shown_key = candidate, key
        self._render_body(opening=opening)

    def watch_mode(self, mode: str) -> None:
        self._render_body()

    def _render_body(self, opening: bool = True) -> Rendered | None:
        """Render the view; `opening`: a new candidate or view, placed at its first violation or
        change (else the sideways shift stays where the person put it)."""
        if not self.is_mounted:
            return
        body = self.query_one("#diff-body", Static)
        # The keys that change the view, where the eye is (the footer has no room for them).
        other = "unified" if self.mode == "split" else "split"
        self.border_title = f"diff · {self.mode} · v {other} · f {'diff' if self.mode == 'full' else 'whole'}"
        self.set_class(self.mode == "split", "-split")
        c = self.candidate
        if c is None:
            body.styles.width, body.styles.height = "1fr", 1
            body.update(Text("waiting for the first candidate…", style="dim"))
            self.x = self.max_x = 0
            self._update_subtitle()
            return None
        full = self.content_region.width
        self._open_pending = full <= 0 and (opening or self._open_pending)

        def render(width: int) -> Rendered:
            if opening:
                self.x = opening_x(self.mode, c, width)
            return RENDERERS[self.mode](c, width, self.x)

        width = full if full > 0 else 100
        view = render(width)
        if full > 0 and view.height > self.content_region.height:  # a vertical scrollbar takes columns
            width = full - self.styles.scrollbar_size_vertical
            view = render(width)
        self.max_x = view.max_x
        if self.x > self.max_x:  # narrower than before, or a shorter candidate
            self.x = self.max_x
            view = RENDERERS[self.mode](c, width, self.x)
        # Explicit size: a known height is never re-measured by rendering.
        body.styles.width = "1fr"
        body.styles.height = view.height
        body.update(view.renderable)
        if opening and full > 0:
            self.call_after_refresh(self._bring_into_view, view)
        self._update_subtitle()
        return view

    def _bring_into_view(self, view: Rendered) -> None:
        """Up and down: the first rule violation (why the candidate was rejected), else the first change."""
        if view.first_mark is not None:
            self.scroll_to(y=max(0, view.first_mark - 4), animate=False)
        elif view.focus is not None and not (
                self.scroll_y <= view.focus < self.scroll_y + self.scrollable_content_region.height - 1):
            self.scroll_to(y=max(0, view.focus - 4), animate=False)
        self._opened_y = self.scroll_y

    def on_resize(self, event: events.Resize) -> None:
        if self.candidate is None:
            return
        untouched = self._opened_y is not None and self.scroll_y == self._opened_y
        pending = self._open_pending
        view = self._render_body(opening=pending)  # the code columns follow the width
        if view is not None and untouched and not pending:
            # Still where opening put it: keep the change in view (the decision prompt takes rows).
            self.call_after_refresh(self._bring_into_view, view)

    # -- sideways -----------------------------------------------------------------------------
    def shift_to(self, x: int) -> None:
        x = max(0, min(x, self.max_x))
        if x != self.x:
            self.x = x
            self._render_body(opening=False)

    def action_sideways(self, direction: int) -> None:
        self.shift_to(self.x + direction * SIDE_STEP)

    def action_line_start(self) -> None:
        self.shift_to(0)

    def action_line_end(self) -> None:
        self.shift_to(self.max_x)

    def on_mouse_scroll_right(self, event: events.MouseScrollRight) -> None:
        self.shift_to(self.x + SIDE_STEP // 2)
        event.stop()

    def on_mouse_scroll_left(self, event: events.MouseScrollLeft) -> None:
        self.shift_to(self.x - SIDE_STEP // 2)
        event.stop()

    def _update_subtitle(self) -> None:
        """Says there is more sideways, where the view is, and which keys move it."""
        more = self.max_x > 0 and self.candidate is not None
        self.border_subtitle = f"col {self.x + 1} · ←→ scroll · shift+←→ start/end" if more else ""

    def on_mount(self) -> None:
        self._render_body()

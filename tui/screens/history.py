"""History (`h`): every candidate of the session, and any one of them reopened read-only.

Built from the session folder, not from the screen's state: the journal (through
`harness.sessions.report.collect`, the fold `warpsmith report` uses) for the proposals, verdicts, decisions
and reasoning, and the session's git repository for the sources, each candidate diffed against
the incumbent it was measured against. So it reads the same in a session resumed from disk as in
the one that ran it. `HistoryScreen` dismisses with the chosen step; `open_history` then shows it
in a `CandidateScreen`, whose Esc comes back to the list at that row.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Markdown, Static

from harness import events as ev
from harness.evaluate.records import Verdict
from harness.sessions.report import Step, collect
from harness.profiling.roofline import Roof
from tui.state import CandidateView, RunState
from tui.widgets.bench import COLUMNS, legend_text, lineage_text, shape_rows, verdict_head, verdict_lines
from tui.widgets.diff import DiffPane

if TYPE_CHECKING:
    from harness.sessions.session import Session
    from tui.host import RunHost

HISTORY_COLUMNS = ("#", "description", "verdict", "geomean", "× per shape", "decision", "by", "reason")
# When the rows are wider than the table, these give up width (each down to its minimum, the one with
# the most to spare first), so the reason gets the columns that are there: shown whole when they allow.
SHRINKABLE = {"description": 16, "verdict": 16, "× per shape": 9, "reason": 16}
CELL_PADDING = 2  # DataTable's: one column each side of a cell


def _clip(s: str, n: int) -> str:
    s = " ".join(s.split())
    return s if len(s) <= n else s[: n - 1] + "…"


def verdict_word(v: Verdict | None) -> str:
    """accepted | rejected at STAGE: RULE | not evaluated."""
    if v is None:
        return "not evaluated"
    if v.accepted:
        return "accepted"
    rules = [r.rule for r in [*v.violations, *v.reasons] if r.rule]
    return f"rejected at {v.stage_shown}" + (f": {str(rules[0]).removeprefix('static:')}" if rules else "")


def per_shape(v: Verdict | None) -> str:
    shapes = v.shapes if v is not None else []
    sp = [s.speedup for s in shapes]
    if not any(isinstance(x, (int, float)) for x in sp):
        return "no timing" if shapes else "-"
    return " ".join(f"{x:.2f}" if isinstance(x, (int, float)) else "-" for x in sp)


def history_row(step: Step, current: int | None = None) -> tuple[str, ...]:
    """One candidate as the list shows it."""
    g = step.verdict.geomean_speedup if step.verdict is not None else None
    if step.action:
        decision = step.action + (" (override)" if step.override else "")
    elif step.buckets:
        decision = "buckets " + ",".join(step.buckets)
    else:
        decision = "deciding" if step.iteration == current else "undecided"
    if step.buckets and step.action:
        decision += " +buckets"
    return (str(step.iteration), " ".join(step.description.split()), verdict_word(step.verdict),
            f"{g:.3f}x" if isinstance(g, (int, float)) else "-", per_shape(step.verdict), decision,
            step.by or step.bucket_by or "-", " ".join(step.reason.split()) or "-")


def column_widths(rows: list[tuple[str, ...]], available: int) -> list[int]:
    """Each column's width: what its longest cell needs, less (SHRINKABLE) where the table has fewer
    columns than that."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(HISTORY_COLUMNS)]
    floor = {HISTORY_COLUMNS.index(c): m for c, m in SHRINKABLE.items()}
    excess = sum(widths) + CELL_PADDING * len(widths) - available
    while excess > 0:
        i = max(floor, key=lambda j: widths[j] - floor[j])
        if widths[i] <= floor[i]:
            break  # at every minimum: the table scrolls sideways
        widths[i] -= 1
        excess -= 1
    return widths


def step_state(step: Step, steps: list[Step]) -> RunState:
    """A RunState holding only this step's verdict and decision, and the session's keeps up to it:
    what the bench pane's renderers need to show it exactly as they showed it live."""
    # The bench's renderers read the verdict the loop's event carried: the journal's, read (an empty
    # object, which no evaluator writes, shows as no verdict).
    v = step.verdict if step.verdict is not None and step.verdict.to_json() else None
    st = RunState(iteration=step.iteration, verdict=v, verdict_iteration=step.iteration)
    st.verdicts = {step.iteration: v} if v is not None else {}
    st.incumbents = {step.iteration: step.incumbent}
    st.keeps = [ev.Decision(s.iteration, "keep", s.by, s.override, s.reason, s.commit)
                for s in steps if s.action == "keep" and s.iteration < step.iteration]
    if step.action:
        st.last_decision = ev.Decision(step.iteration, step.action, step.by, step.override, step.reason, step.commit)
    else:
        rec = step.verdict.recommended if step.verdict is not None else None
        if rec is not None:
            st.recommendation = ev.Recommendation(step.iteration, rec.action, rec.reason, bool(rec.can_keep))
    return st


def candidate_view(session: "Session", step: Step) -> CandidateView:
    """The candidate against the incumbent it was measured against, from the session's git repo."""
    ws = session.workspace

    def source(commit: str) -> str:
        try:
            return ws.source(commit) if commit else ""
        except Exception:  # not in the repo (a hand-edited folder): shown empty, not a crash
            return ""

    new, old = source(step.commit), source(step.incumbent)
    return CandidateView(step.iteration, step.commit, step.description, old, new, step.agent, step.model,
                         list(step.verdict.violations if step.verdict is not None else []), step.incumbent)


def transcripts(session: "Session", iteration: int) -> list[Path]:
    return sorted(session.transcripts.glob(f"iter-{iteration:04d}-*.md"))


class SidePane(VerticalScroll):
    ALLOW_MAXIMIZE = True  # z (scrolling containers default to False)


class HistoryScreen(Screen["Step | None"]):
    """The session's candidates, newest last; Enter opens one (dismissed with its step)."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [Binding("escape,q,h", "close", "close"), Binding("enter", "open", "open", show=True)]

    def __init__(self, session: "Session", select: int | None = None, current: int | None = None) -> None:
        super().__init__()
        self.session, self.select, self.current = session, select, current
        self.steps: list[Step] = []
        self.loaded = False

    def compose(self) -> ComposeResult:
        with Vertical(id="history-box"):
            yield Static(Text(f"History of {self.session.id}", style="bold"), id="history-title")
            yield DataTable(id="history-table", cursor_type="row", zebra_stripes=True)
            yield Static(Text("reading the journal…", style="dim"), id="history-note")
        yield Footer()

    def on_mount(self) -> None:
        self.load()

    @work(thread=True, exclusive=True, group="history")
    def load(self) -> None:
        steps = collect(self.session)  # the whole journal: off the UI thread
        self.app.call_from_thread(self._fill, steps)

    def _fill(self, steps: list[Step]) -> None:
        self.steps = steps
        table = self.query_one("#history-table", DataTable)
        self._lay_out()
        kept = sum(s.action == "keep" for s in steps)
        self.query_one("#history-note", Static).update(Text(
            f"{len(steps)} candidate{'' if len(steps) == 1 else 's'}, {kept} kept · × per shape: each "
            "shape's speedup against the incumbent of its time · Enter: its diff, verdict and reasoning",
            style="dim") if steps else Text("no candidate yet", style="dim"))
        if self.select is not None and str(self.select) in {str(s.iteration) for s in steps}:
            table.move_cursor(row=table.get_row_index(str(self.select)))
        elif steps:
            table.move_cursor(row=len(steps) - 1)
        table.focus()
        self.loaded = True

    def _lay_out(self) -> None:
        """The rows, each column as wide as the table allows (column_widths), cut with … beyond it."""
        table = self.query_one("#history-table", DataTable)
        rows = [history_row(s, self.current) for s in self.steps]
        widths = column_widths(rows, table.scrollable_content_region.width)
        row = table.cursor_row
        table.clear(columns=True)
        for label, w in zip(HISTORY_COLUMNS, widths):
            table.add_column(label, width=w)
        for s, cells in zip(self.steps, rows):
            table.add_row(*(Text(_clip(c, w)) for c, w in zip(cells, widths)), key=str(s.iteration))
        if rows:
            table.move_cursor(row=min(row, len(rows) - 1))

    def on_resize(self) -> None:
        if self.loaded:
            self._lay_out()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self._open(str(event.row_key.value))

    def action_open(self) -> None:
        table = self.query_one("#history-table", DataTable)
        if table.row_count:
            self._open(str(table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value))

    def _open(self, key: str) -> None:
        step = next((s for s in self.steps if str(s.iteration) == key), None)
        if step is not None:
            self.dismiss(step)

    def action_close(self) -> None:
        self.dismiss(None)


class CandidateScreen(Screen[None]):
    """One earlier candidate, read-only: its diff against its incumbent, its verdict with its
    decision, and the agent's reasoning. Nothing here decides anything."""

    CSS_PATH = Path(__file__).with_suffix(".tcss")
    AUTO_FOCUS = "#past-diff"
    ALLOW_IN_MAXIMIZED_VIEW = "Footer"
    BINDINGS = [
        Binding("escape,q", "close", "back"),
        Binding("v", "split", "unified/split"),
        Binding("f", "full", "whole/diff"),
        Binding("z", "maximize", "max pane"),
    ]

    def __init__(self, view: CandidateView, state: RunState, reasoning: str, transcript_files: list[Path],
                 roof: Roof | None) -> None:
        super().__init__()
        self.view, self.state, self.reasoning = view, state, reasoning
        self.transcript_files, self.roof = transcript_files, roof
        self.state.roof = roof

    def compose(self) -> ComposeResult:
        v = self.view
        yield Static(Text.assemble((f"#{v.iteration} ", "bold"), (v.commit[:10] + " ", "dim"),
                                   (v.description, "bold"), ("  · read-only", "italic dim")), id="past-title")
        with Horizontal(id="past-panes"):
            yield DiffPane(id="past-diff")
            with SidePane(id="past-side", classes="pane") as side:
                side.border_title = "verdict · reasoning"
                yield Static(self._verdict(), id="past-verdict")
                yield Markdown(self.reasoning or "*(no reasoning in the journal for this candidate)*",
                               id="past-reasoning")
                if self.transcript_files:
                    yield Static(Text("transcript: " + ", ".join(str(p) for p in self.transcript_files),
                                      style="dim"), id="past-transcripts")
        yield Footer()

    def _verdict(self) -> Group:
        st = self.state
        parts: list[Text] = [verdict_head(st)]
        if st.verdict is not None:
            lineage = lineage_text(st, st.verdict_iteration)
            if lineage:
                parts.append(lineage)
            rows = shape_rows(st.verdict, self.roof)
            if rows:
                widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]
                lines = [Text("  ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)), style="bold")]
                lines += [Text("  ".join(x.ljust(w) for x, w in zip(r, widths))) for r in rows]
                for t in lines:  # a row per shape: the times (last) are cut in a narrow column, never wrapped
                    t.no_wrap, t.overflow = True, "crop"
                parts += lines
                legend = legend_text(st.verdict, self.roof)
                if legend:
                    parts.append(legend)
            parts += verdict_lines(st)
        return Group(*parts)

    def on_mount(self) -> None:
        diff = self.query_one("#past-diff", DiffPane)
        diff.show(self.view)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_split(self) -> None:
        diff = self.query_one("#past-diff", DiffPane)
        diff.mode = "unified" if diff.mode == "split" else "split"

    def action_full(self) -> None:
        diff = self.query_one("#past-diff", DiffPane)
        diff.mode = "unified" if diff.mode == "full" else "full"

    def action_maximize(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        node = self.focused
        while node is not None and not (isinstance(node, Widget) and node.has_class("pane")):
            node = node.parent
        if node is not None:
            self.maximize(node, container=False)


def open_history(app: "RunHost", select: int | None = None) -> None:
    """`h`: the list; Enter opens a candidate; Esc there comes back to the list at its row."""
    pending = app.decider.pending
    screen = HistoryScreen(app.session, select, pending.iteration if pending is not None else None)

    def picked(step: Step | None) -> None:
        if step is None:
            return
        detail = CandidateScreen(candidate_view(app.session, step), step_state(step, screen.steps),
                                 step.reasoning, transcripts(app.session, step.iteration),
                                 app.state.roof)  # type: ignore[arg-type]
        app.push_screen(detail, lambda _: open_history(app, step.iteration))

    app.push_screen(screen, picked)

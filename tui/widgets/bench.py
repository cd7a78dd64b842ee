"""Bench pane: per-shape table, verdict and reasons, recommendation, best-speedup sparkline,
tally of outcomes, the incumbent's bottleneck profile, per-model rule/DSL breaks and the ideas."""
from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Sparkline, Static

from harness.evaluate.records import ShapeResult, Verdict
from harness.authoring.packs import discover
from harness.profiling.roofline import Roof, hbm_roof
from tui.state import TALLY_KEYS, RunState

# Speedup, its noise band and the roofline first: in a narrow pane the times are what is cut off.
# A shape that failed its check says "wrong" where its speedup would be; one never tried, "not run".
COLUMNS = ("shape", "×", "±", "roof", "best", "cand")  # times in µs (the pane title says so)
NOISE_MARK = "~"  # a speedup inside its noise band: no win and no loss


def _num(v: object, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def _is_num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _or_empty(v: Verdict | None) -> Verdict:
    return v if v is not None else Verdict.empty()


def within_noise(s: ShapeResult) -> bool:
    """The shape's speedup is inside its noise band (the paired bootstrap's 99% interval)."""
    sp, band = s.speedup, s.noise_pct
    return _is_num(sp) and _is_num(band) and abs(sp - 1.0) * 100 <= band


def roof_pct(s: ShapeResult, roof: Roof | None) -> float | None:
    """% of the hardware pack's roofline for the candidate's time when a pack gives one, else the
    evaluator's (against the copy bandwidth it measured)."""
    if roof is not None and s.name in roof.floors_us:
        return roof.pct(str(s.name), s.candidate_us)
    v = s.roofline_pct
    return float(v) if _is_num(v) else None


def shape_rows(verdict: Verdict | None, roof: Roof | None = None) -> list[tuple[str, ...]]:
    rows = []
    for s in _or_empty(verdict).shapes:
        ok = s.correct
        sp = s.speedup
        speed = (NOISE_MARK if within_noise(s) else "") + _num(sp, ".3f") + ("x" if _is_num(sp) else "")
        if ok is False:
            speed = "wrong" if s.ran else "not run"
        band = s.noise_pct
        pct = roof_pct(s, roof)
        rows.append((str(s.name or "?"), speed,
                     f"±{band:.1f}%" if _is_num(band) else "-", f"{pct:.0f}%" if pct is not None else "-",
                     _num(s.incumbent_us, ".1f"), _num(s.candidate_us, ".1f")))
    return rows


def lineage_text(state: RunState, iteration: int) -> Text:
    """Which keep the incumbent of `iteration` came from: "vs #4 1a2b3c4d5e (kept by human) ·
    baseline → #1 → #4". Empty when the journal doesn't say what it was measured against."""
    inc = state.incumbents.get(iteration, "")
    if not inc:
        return Text("")
    chain = state.lineage(inc)
    t = Text("vs ", style="dim")
    if not chain:
        t.append("the baseline", style="bold")
        t.append(f" {inc[:10]}", style="dim")
        return t
    last = chain[-1]
    t.append(f"#{last.iteration} {last.commit[:10]}", style="bold")
    t.append(f" (kept by {last.by}{', override' if last.override else ''})", style="dim")
    t.append(" · baseline → " + " → ".join(f"#{d.iteration}" for d in chain), style="dim")
    return t


def legend_text(verdict: Verdict | None, roof: Roof | None) -> Text:
    """What the columns mean, under the table: the band is the noise, the roof is against what."""
    v = _or_empty(verdict)
    if not v.timing_available or not v.shapes:
        return Text("")
    against = roof.label if roof is not None else "the measured copy bandwidth"
    t = Text(f"± noise band (99%): {NOISE_MARK} inside it, no win · roof: % of {against}", style="dim")
    return t


MAX_REASONS = 8
_LINE = re.compile(r"\bline (\d+)")


def is_previous(state: RunState) -> bool:
    """The verdict on screen belongs to an earlier candidate than the one being proposed or
    evaluated now, and is decided. (In a parallel run a newer iteration starts while this one
    still waits for its decision: then it is the current question, not the previous one.)"""
    decided = state.last_decision is not None and state.last_decision.iteration >= state.verdict_iteration
    return (state.verdict is not None and state.phase != "ended" and decided
            and state.iteration > state.verdict_iteration)


def verdict_head(state: RunState) -> Text:
    """One line above the table: whose verdict it is, and whether a newer candidate is on its way."""
    if state.verdict is None:
        if state.phase == "evaluating" and state.call_timeout_s:
            return Text(f"evaluating #{state.iteration}: a call may take up to {state.call_timeout_s:g} s",
                        style="italic")
        return Text("no verdict yet", style="dim")
    v = state.verdict
    previous = is_previous(state)
    t = Text()
    if previous:
        t.append("previous: ", style="bold yellow")
    t.append(f"#{state.verdict_iteration} ", style="bold")
    if v.accepted:
        t.append("accepted", style="bold green")
    else:
        t.append(f"rejected at {v.stage_shown}", style="bold red")
    g = v.geomean_speedup
    if isinstance(g, (int, float)):
        t.append(f"  geomean {g:.3f}x", style="bold")
    if previous:
        t.append(f" · now #{state.iteration}", style="italic")
        t.stylize("dim")
    if state.phase == "evaluating" and state.call_timeout_s and state.iteration > state.verdict_iteration:
        t.append(f" · evaluating #{state.iteration}: a call may take up to {state.call_timeout_s:g} s",
                 style="italic")
    return t


def reason_lines(v: Verdict) -> list[str]:
    """One line per reason: a rule violation as its rule id and line (the diff marks the line and
    the reasoning pane has the whole message), anything else as the first line of its message."""
    out: list[str] = []
    shown: set[str] = set()
    for viol in v.violations:
        if not viol.is_error:
            continue
        rule = str(viol.rule or "?")
        shown.add(rule)
        line = viol.line
        out.append(f"{rule}  line {line}" if isinstance(line, int) and line > 0 else f"{rule}  (file)")
    for r in v.reasons:
        rule = str(r.rule or "?")
        base = rule.removeprefix("static:")
        if base in shown:
            continue  # listed above, from the violation itself
        msg = str(r.message)
        m = _LINE.search(msg) if rule.startswith("static:") else None
        first = msg.strip().splitlines()[0] if msg.strip() else ""
        out.append(f"{base}  line {m.group(1)}" if m else (f"{rule}: {first}" if first else rule))
    return out


def verdict_lines(state: RunState) -> list[Text]:
    """Below the table: timing, one line per reason, then the decision (or the recommendation
    while it is open). Every line stays one line: the reasons are cut, not wrapped."""
    if state.verdict is None:
        return []
    v = state.verdict
    lines: list[Text] = []
    if not v.timing_available:
        lines.append(Text("timing unavailable (interpreter)", style="yellow"))
    reasons = reason_lines(v)
    for r in reasons[:MAX_REASONS]:
        line = Text.assemble(("• ", "bold"), r)
        line.no_wrap, line.overflow = True, "ellipsis"
        lines.append(line)
    if len(reasons) > MAX_REASONS:
        lines.append(Text(f"  +{len(reasons) - MAX_REASONS} more (reasoning pane)", style="dim"))
    d, rec = state.last_decision, state.recommendation
    if d is not None and d.iteration == state.verdict_iteration:
        t = Text("decided ", style="bold")
        t.append(d.action.upper(), style="bold green" if d.action == "keep" else "bold red")
        t.append(f" by {d.by}" + (" (override)" if d.override else ""))
        lines.append(t)
    elif rec is not None and rec.iteration == state.verdict_iteration:
        t = Text("recommend ", style="bold")
        buckets = v.keep_buckets  # keep_policy: a keep for some buckets only
        if buckets:
            t.append(f"KEEP FOR {', '.join(buckets)}", style="bold yellow")
        else:
            t.append(rec.action.upper(), style="bold green" if rec.action == "keep" else "bold red")
        if v.accepted:  # a rejection's reason is the list above (and the decision bar's)
            t.append(f": {rec.reason}")
        lines.append(t)
        if not rec.can_keep:
            lines.append(Text(f"cannot be kept: {v.cannot_keep_reason}", style="red"))
    if is_previous(state):
        for t in lines:
            t.stylize("dim")
    return lines


def verdict_text(state: RunState) -> Text:
    """The head and the lines below the table, as one text (tests, plain output)."""
    return Text("\n").join([verdict_head(state), *verdict_lines(state)])


class Flow:
    """Short texts left to right, a line broken only between two of them: the tally's `crashed 0`
    never leaves its 0 alone on the next line (Rich wraps at any space). All on one line when they fit
    there `gap` apart, or one column apart (the bench pane at 160 columns); else lines `gap` apart."""

    def __init__(self, items: list[Text], gap: int = 2) -> None:
        self.items, self.gap = items, gap

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        total = sum(i.cell_len for i in self.items)
        for gap in (self.gap, 1):
            if total + gap * max(0, len(self.items) - 1) <= options.max_width:
                yield Text(" " * gap).join(self.items)
                return
        line = Text()
        for item in self.items:
            if line.cell_len and line.cell_len + self.gap + item.cell_len > options.max_width:
                yield line
                line = Text()
            if line.cell_len:
                line.append(" " * self.gap)
            line.append_text(item)
        yield line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((i.cell_len for i in self.items), default=0)
        return Measurement(widest, sum(i.cell_len for i in self.items) + self.gap * max(0, len(self.items) - 1))


def tally_items(state: RunState) -> list[Text]:
    return [Text.assemble((f"{k} ", "dim"), (str(state.tally.get(k, 0)), "bold")) for k in TALLY_KEYS]


def best_text(state: RunState) -> Text:
    """The best speedup over the baseline, only where something was timed: without a GPU every
    figure would be 1.000x beside "timing unavailable", a number nothing measured."""
    if state.untimed_keep:
        return Text("best speedup over baseline unknown (a keep without timing)", style="bold")
    if not state.timed:
        return Text("")
    return Text(f"best speedup over baseline {state.best_speedup:.3f}x", style="bold")


def tally_text(state: RunState) -> Text:
    """The tally and the best speedup as one text (tests, plain output)."""
    t = Text("  ").join(tally_items(state))
    best = best_text(state)
    return Text("\n").join([t, best]) if best else t


def models_text(state: RunState) -> Text:
    t = Text()
    for name, s in state.model_stats.items():
        t.append(f"{name}: ", style="bold")
        t.append(f"{s.candidates} candidate{'' if s.candidates == 1 else 's'}, {s.dsl_breaks} broke the DSL, "
                 f"{s.rule_breaks} broke a rule\n")
    if state.ideas:
        t.append("ideas:\n", style="bold")
        for i, idea in enumerate(state.ideas, 1):
            t.append(f" {i}. {idea}\n")
    if state.workers:
        t.append("workers: " + "; ".join(f"{w.get('name')}({w.get('gpu', '-')}): {w.get('state')}"
                                          for w in state.workers))
    return t


def profile_text(state: RunState) -> Text:
    """The incumbent's bottleneck, shape by shape: what bounds it and how close to the ceiling."""
    p = state.profile
    if not p:
        return Text("")
    t = Text()
    t.append(f"incumbent {str(p.get('incumbent', ''))[:10]} profile", style="bold")
    t.append(" · % of measured ceilings\n", style="dim")
    for s in p.get("shapes", []):
        bound = s.get("bound") if s.get("us") else f"expected {s.get('expected_bound')}"
        pct = {k: s.get(f"{k}_pct") for k in ("memory", "compute", "launch")}
        # Two lines a shape: the pane is ~40 columns beside the diff while deciding.
        t.append(f"{str(s.get('name', '?'))[:16]:<16} ", style="bold")
        t.append(f"{bound}\n", style="yellow" if bound == "launch" else "cyan")
        t.append("  " + "  ".join(f"{k} {v:.0f}%" for k, v in pct.items() if isinstance(v, (int, float))) + "\n")
    return t


class BenchPane(VerticalScroll):
    DEFAULT_CLASSES = "pane"
    ALLOW_MAXIMIZE = True  # z (scrolling containers default to False)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "bench · times in µs"
        self._roof_key: tuple | None = None
        self.roof_ready = False  # the hardware pack's roofline has been worked out (tests wait on it)

    def compose(self) -> ComposeResult:
        yield Static(id="verdict-head")
        yield Static(id="lineage")
        yield DataTable(id="shapes", show_cursor=False, zebra_stripes=True)
        yield Static(id="legend")
        yield Static(id="verdict")
        yield Static(Text("best speedup per decision", style="dim"), id="spark-label")
        yield Sparkline([], id="history")
        yield Static(id="tally")
        yield Static(id="profile")
        yield Static(id="models")

    def show(self, state: RunState) -> None:
        if not self.is_mounted:
            return
        table = self.query_one("#shapes", DataTable)
        # Explicit widths: auto-width columns kept stale header widths when rows arrived later.
        self._load_roof(state)
        rows = shape_rows(state.verdict, state.roof)
        table.clear(columns=True)
        for i, label in enumerate(COLUMNS):
            table.add_column(label, width=max([len(label)] + [len(r[i]) for r in rows]))
        for row in rows:
            table.add_row(*(Text(c) for c in row))  # (a str cell is read as markup; shape names come from task.toml)
        self.set_class(is_previous(state), "-previous")
        self.query_one("#verdict-head", Static).update(verdict_head(state))
        lineage = lineage_text(state, state.verdict_iteration) if state.verdict is not None else Text("")
        self.query_one("#lineage", Static).display = bool(lineage)
        self.query_one("#lineage", Static).update(lineage)
        legend = legend_text(state.verdict, state.roof)
        self.query_one("#legend", Static).display = bool(legend)
        self.query_one("#legend", Static).update(legend)
        verdict = self.query_one("#verdict", Static)
        lines = verdict_lines(state)
        verdict.display = bool(lines)
        verdict.update(Group(*lines))
        # A flat line still says "nothing kept made it faster"; Sparkline needs 2 points to draw
        # (one point is drawn as a solid block: nothing at all until the first decision).
        # Without timings (no GPU) every point would be 1.0: a flat line that looks like a result.
        untimed = bool(state.verdicts) and not state.timed
        history = self.query_one("#history", Sparkline)
        history.display = bool(state.best_history) and not untimed
        history.data = [1.0] + state.best_history
        self.query_one("#spark-label", Static).update(
            Text("best speedup per decision: timing unavailable on this machine (interpreter)", style="yellow")
            if untimed else Text("best speedup per decision", style="dim") if state.best_history
            else Text("best speedup: no decisions yet", style="dim"))
        best = best_text(state)
        self.query_one("#tally", Static).update(Group(Flow(tally_items(state)), *([best] if best else [])))
        profile = self.query_one("#profile", Static)
        profile.display = state.profile is not None
        profile.update(profile_text(state))
        self.query_one("#models", Static).update(models_text(state))

    def _load_roof(self, state: RunState) -> None:
        """The session's hardware pack's roofline, worked out once per pack selection off the UI
        thread (finding the packs and sizing the task's shapes take ~0.2 s), then shown."""
        key = tuple(state.packs)
        if key == self._roof_key:
            return
        self._roof_key = key
        app = self.app
        task = getattr(app, "task_", None)
        catalog = getattr(app, "pack_catalog", None)

        def work() -> None:
            cat = catalog or discover()
            roof = hbm_roof(task, [cat.packs[i] for i in key if i in cat.packs]) if task is not None else None
            app.call_from_thread(loaded, roof)

        def loaded(roof: Roof | None) -> None:
            if self._roof_key == key:
                state.roof = roof
                self.roof_ready = True
                self.show(state)

        self.roof_ready = False
        self.run_worker(work, thread=True, exclusive=True, group="roof")

    def on_mount(self) -> None:
        self.show(self.app.state)  # type: ignore[attr-defined]

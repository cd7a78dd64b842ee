"""Bench pane: per-shape table, verdict and reasons, recommendation, best-speedup sparkline,
tally of outcomes, the incumbent's bottleneck profile, per-model rule/DSL breaks and the ideas."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Sparkline, Static

from tui.state import TALLY_KEYS, RunState

COLUMNS = ("shape", "ok", "best", "cand", "×", "roof")  # times in µs (the pane title says so)


def _num(v: object, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else "-"


def shape_rows(verdict: dict) -> list[tuple[str, ...]]:
    rows = []
    for s in verdict.get("shapes", []):
        ok = s.get("correct")
        rows.append((str(s.get("name", "?")), "yes" if ok else ("NO" if ok is False else "-"),
                     _num(s.get("incumbent_us"), ".1f"), _num(s.get("candidate_us"), ".1f"),
                     _num(s.get("speedup"), ".3f") + ("x" if isinstance(s.get("speedup"), (int, float)) else ""),
                     _num(s.get("roofline_pct"), ".0f") + ("%" if isinstance(s.get("roofline_pct"), (int, float)) else "")))
    return rows


def verdict_text(state: RunState) -> Text:
    v = state.verdict
    if v is None:
        return Text("no verdict yet", style="dim")
    t = Text()
    t.append(f"#{state.verdict_iteration} ", style="bold")
    if v.get("accepted"):
        t.append("accepted", style="bold green")
    else:
        t.append(f"rejected at {v.get('stage', '?')}", style="bold red")
    g = v.get("geomean_speedup")
    if isinstance(g, (int, float)):
        t.append(f"  geomean {g:.3f}x", style="bold")
    if not v.get("timing_available", False):
        t.append("\ntiming unavailable (interpreter)", style="yellow")
    for r in v.get("reasons", [])[:8]:
        t.append(f"\n• {r.get('rule')}: ", style="bold")
        t.append(str(r.get("message", "")))
    rec = state.recommendation
    if rec is not None and rec.iteration == state.verdict_iteration:
        t.append("\nrecommend ", style="bold")
        t.append(rec.action.upper(), style="bold green" if rec.action == "keep" else "bold red")
        t.append(f": {rec.reason}")
        if not rec.can_keep:
            t.append("\ncannot be kept (failed correctness or a guard)", style="red")
    return t


def tally_text(state: RunState) -> Text:
    t = Text()
    for i, k in enumerate(TALLY_KEYS):
        t.append(("  " if i else "") + f"{k} ", style="dim")
        t.append(str(state.tally.get(k, 0)), style="bold")
    t.append(f"\nbest speedup over baseline {state.best_speedup:.3f}x", style="bold")
    return t


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
        t.append(f"{str(s.get('name', '?'))[:16]:<16} ", style="bold")
        t.append(f"{bound:<8}", style="yellow" if bound == "launch" else "cyan")
        t.append("  " + "  ".join(f"{k[:4]} {v:.0f}%" for k, v in pct.items() if isinstance(v, (int, float))) + "\n")
    return t


class BenchPane(VerticalScroll):
    DEFAULT_CLASSES = "pane"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "bench · times in µs"

    def compose(self) -> ComposeResult:
        yield DataTable(id="shapes", show_cursor=False, zebra_stripes=True)
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
        rows = shape_rows(state.verdict or {})
        table.clear(columns=True)
        for i, label in enumerate(COLUMNS):
            table.add_column(label, width=max([len(label)] + [len(r[i]) for r in rows]))
        for row in rows:
            table.add_row(*row)
        self.query_one("#verdict", Static).update(verdict_text(state))
        # A flat line still says "nothing kept made it faster"; Sparkline needs 2 points to draw.
        data = [1.0] + state.best_history
        self.query_one("#history", Sparkline).data = data
        self.query_one("#tally", Static).update(tally_text(state))
        profile = self.query_one("#profile", Static)
        profile.display = state.profile is not None
        profile.update(profile_text(state))
        self.query_one("#models", Static).update(models_text(state))

    def on_mount(self) -> None:
        self.show(self.app.state)  # type: ignore[attr-defined]

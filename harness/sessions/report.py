"""`warpsmith report SESSION -o report.html [--format md]`: what a session did, readable offline.

Everything comes from the session folder: the journal (proposals, verdicts, decisions, bucket keeps,
prompt packs) and the git repository (baseline and best sources). Plots are matplotlib (Agg), embedded
as base64 PNG in the HTML so the file opens anywhere with no network; the markdown form writes the
PNGs beside it. Speedups are the evaluator's: each candidate against the incumbent of its time, so the
best-so-far curve is the product of the kept steps' speedups.
"""
from __future__ import annotations

import base64
import html
import io
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.model.dispatch import dispatch_table
from harness.evaluate.records import ShapeResult, Verdict
from harness.sessions.history import SessionHistory
from harness.invocation import command
from harness.authoring.tasks import TaskError, load_task
from harness.sessions.workspace import unified_diff

OUTCOME_COLORS = {"kept": "#2a9d8f", "kept for buckets": "#8ab17d", "reverted": "#e9c46a",
                  "incorrect": "#e76f51", "crashed": "#6d597a"}


@dataclass
class Step:
    iteration: int
    commit: str = ""
    description: str = ""
    agent: str = ""
    model: str = ""
    verdict: Verdict | None = None  # None: not evaluated
    action: str = ""  # keep | revert | "" (undecided)
    by: str = ""
    override: bool = False
    reason: str = ""
    packs: list[dict] = field(default_factory=list)
    buckets: list[str] = field(default_factory=list)  # bucket-limited keep
    bucket_by: str = ""
    incumbent: str = ""  # the commit it was diffed and measured against
    reasoning: str = ""  # the agent's whole reasoning text for this proposal

    @property
    def speedup(self) -> float | None:
        g = self.verdict.geomean_speedup if self.verdict is not None else None
        return float(g) if isinstance(g, (int, float)) and g > 0 else None

    @property
    def outcome(self) -> str:
        """kept | kept for buckets | reverted | incorrect | crashed | rejected: <rule>."""
        if self.action == "keep":
            return "kept"
        if self.buckets:
            return "kept for buckets"
        v = self.verdict or Verdict()
        if v.accepted:
            return "reverted"
        stage = v.stage
        rules = [r.rule for r in v.reasons if r.rule]
        rules += [x.rule for x in v.violations if x.rule]
        if set(rules) & {"crashed", "timeout", "import-error", "oom"} or stage == "import":
            return "crashed"
        if stage == "correctness":
            return "incorrect"
        return f"rejected: {rules[0] if rules else stage or 'unknown'}"


def collect(session, history: SessionHistory | None = None) -> list[Step]:
    h = history or SessionHistory.of(session)
    steps = []
    for it, st in h.steps.items():
        if not isinstance(it, int):
            continue
        s = Step(it)
        if st.proposal is not None:
            r = st.proposal
            s.commit, s.description = r.get("commit", ""), r.get("description", "")
            s.agent, s.model = r.get("agent", ""), r.get("model", "")
            s.incumbent = r.get("incumbent", "")
        s.reasoning = st.reasoning
        s.verdict = st.verdict
        if st.decision is not None:
            r = st.decision
            s.action, s.by, s.override, s.reason = r["action"], r.get("by", ""), bool(r.get("override")), r.get("reason", "")
            s.commit = s.commit or r.get("commit", "")
        if st.packs is not None:
            s.packs = st.packs
        if st.bucket_keep is not None:
            s.buckets = list(st.bucket_keep.get("buckets") or [])
            s.bucket_by = st.bucket_keep.get("by", "")
        steps.append(s)
    return [s for s in sorted(steps, key=lambda s: s.iteration) if s.commit or s.verdict is not None]


# -- plots ------------------------------------------------------------------------------------

def _fig_png(fig) -> bytes:
    import matplotlib.pyplot as plt  # (matplotlib: ~0.5 s to import, only for `warpsmith report`; see _pyplot)

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _pyplot():
    import matplotlib  # ~130 ms: only when a plot is drawn (the TUI's history view loads this module)

    matplotlib.use("Agg")  # no display over SSH; must precede pyplot
    import matplotlib.pyplot as plt

    return plt


def plot_progress(steps: list[Step]) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    best, xs, ys = 1.0, [0], [1.0]
    for s in steps:
        if s.action == "keep" and s.speedup:
            best *= s.speedup
        xs.append(s.iteration)
        ys.append(best)
    timed = [s for s in steps if s.speedup]
    if timed:
        for outcome in sorted({s.outcome for s in timed}):
            pts = [s for s in timed if s.outcome == outcome]
            ax.scatter([s.iteration for s in pts], [s.speedup for s in pts], s=18, label=f"{outcome} (vs incumbent)",
                       color=OUTCOME_COLORS.get(outcome, "#999999"), zorder=3)
        ax.step(xs, ys, where="post", color="#264653", lw=2, label="best so far (vs baseline)")
        ax.axhline(1.0, color="#aaaaaa", lw=0.8, ls="--")
        ax.legend(fontsize=7, loc="best")
    else:
        ax.text(0.5, 0.5, "timing unavailable in this session\n(Triton interpreter: no kernel speeds)",
                ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("iteration")
    ax.set_ylabel("geomean speedup")
    ax.set_title("Best speedup over iterations")
    return _fig_png(fig)


def shape_times(steps: list[Step]) -> list[dict]:
    """Per shape: the baseline's time (incumbent of the first timed verdict), the best's (last kept),
    and the roofline floor (time x roofline% of the best measurement)."""
    def shapes(s: Step | None) -> list[ShapeResult]:
        return list(s.verdict.shapes) if s is not None and s.verdict is not None else []

    first = next((s for s in steps if any(sh.incumbent_us for sh in shapes(s))), None)
    last = next((s for s in reversed(steps) if s.action == "keep" and shapes(s)), None)
    rows: dict[str, dict] = {}
    for sh in shapes(first):
        rows.setdefault(sh.name, {"name": sh.name})["baseline_us"] = sh.incumbent_us
    for sh in shapes(last):
        row = rows.setdefault(sh.name, {"name": sh.name})
        row["best_us"] = sh.candidate_us
        pct = sh.roofline_pct
        if isinstance(pct, (int, float)) and pct > 0 and sh.candidate_us:
            row["floor_us"] = sh.candidate_us * pct / 100.0
    return list(rows.values())


def plot_shapes(rows: list[dict]) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    if any(r.get("baseline_us") or r.get("best_us") for r in rows):
        n = len(rows)
        w = 0.27
        for k, (key, label, color) in enumerate([("baseline_us", "baseline", "#adb5bd"), ("best_us", "best", "#2a9d8f"),
                                                 ("floor_us", "roofline floor", "#264653")]):
            vals = [r.get(key) or 0 for r in rows]
            ax.bar([i + (k - 1) * w for i in range(n)], vals, w, label=label, color=color)
        ax.set_xticks(range(n))
        ax.set_xticklabels([r["name"] for r in rows], rotation=20, ha="right", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("time per call (us, log)")
        ax.legend(fontsize=7)
    else:
        ax.text(0.5, 0.5, "no per-shape times (timing unavailable)", ha="center", va="center", transform=ax.transAxes)
    ax.set_title("Per-shape times against the roofline")
    return _fig_png(fig)


def outcome_counts(steps: list[Step]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for s in steps:
        if s.action or s.verdict is not None:
            counts[s.outcome] = counts.get(s.outcome, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def plot_outcomes(counts: dict[str, int]) -> bytes:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.4 * max(1, len(counts))))
    labels = list(counts) or ["(no decisions)"]
    vals = [counts[k] for k in counts] or [0]
    ax.barh(labels, vals, color=[OUTCOME_COLORS.get(k, "#f4a261") for k in labels])
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v}", va="center", fontsize=8)
    ax.invert_yaxis()
    from matplotlib.ticker import MaxNLocator  # (loaded by _pyplot already; at the top it would load matplotlib)

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("candidates")
    ax.set_title("Outcomes (rejections by the rule that stopped them)")
    return _fig_png(fig)


# -- the document --------------------------------------------------------------------------------

@dataclass
class Report:
    title: str
    summary: list[tuple[str, str]]
    plots: list[tuple[str, str, bytes]]  # (name, caption, png)
    kept: list[dict]
    steps: list[dict]
    buckets: list[dict]
    diff: str
    dispatch: list[dict] = field(default_factory=list)  # the routing table per bucket, when the task has buckets
    bucket_diffs: list[tuple[str, str]] = field(default_factory=list)  # (title, diff vs baseline) per bucket winner


def _packs(p: list[dict]) -> str:
    return ", ".join(f"{x.get('id')}@{x.get('version')}#{str(x.get('sha256', ''))[:8]}" for x in p) or "-"


def build_report(session, task=None) -> Report:
    """`task`: the session's task when it isn't where load_task finds it by name (tests, moved folders)."""
    h = SessionHistory.of(session)
    steps = collect(session, h)
    ws = session.workspace
    started = h.session_started
    baseline = ws.git("rev-parse", "refs/candidates/0000")
    best = ws.best
    total = 1.0
    kept = []
    for s in steps:
        if s.action == "keep" or s.buckets:
            if s.action == "keep" and s.speedup:
                total *= s.speedup
            kept.append({"iteration": s.iteration, "commit": s.commit[:10], "what": "kept" if s.action == "keep"
                         else "buckets: " + ", ".join(s.buckets), "speedup": s.speedup,
                         "model": f"{s.agent}:{s.model}" if s.model else s.agent, "packs": _packs(s.packs),
                         "by": (s.by + (" (override)" if s.override else "")) if s.action == "keep"
                         else s.bucket_by or s.by, "description": s.description})
    timed = any(s.speedup for s in steps)
    counts = outcome_counts(steps)
    summary = [("session", session.id), ("task", session.meta.task), ("agent", session.meta.agent),
               ("device", str(started.get("device", "unknown (no SessionStarted record)"))),
               ("created", time.strftime("%Y-%m-%d %H:%M", time.localtime(session.meta.created))),
               ("candidates", str(len(steps))), ("kept", str(sum(1 for s in steps if s.action == "keep"))),
               ("best vs baseline", f"{total:.3f}x (product of kept steps' geomean speedups)" if timed
                else "timing unavailable (Triton interpreter)"),
               ("best commit", best[:12])]
    try:
        diff = unified_diff(ws.source(baseline), ws.source(best), "baseline/kernel.py", "best/kernel.py")
    except Exception as e:  # a damaged repo should not stop the rest of the report
        diff = f"(diff unavailable: {e})"
    bucket_rows = [{"iteration": r["iteration"], "commit": r["commit"][:10], "buckets": ", ".join(r["buckets"]),
                    "by": r.get("by", ""),
                    "speedups": ", ".join(f"{b}: {m.get('speedup'):.3f}x" if isinstance(m.get("speedup"), float)
                                          else f"{b}: n/a" for b, m in (r.get("measurements") or {}).items()) or "-"}
                   for r in h.bucket_keeps]
    plots = [("progress", "Geomean speedup of each timed candidate against the incumbent of its time, and the best "
              "so far against the baseline.", plot_progress(steps)),
             ("shapes", "Per-shape time of the baseline and of the best kept kernel, with the roofline floor "
              "(bytes moved over measured bandwidth).", plot_shapes(shape_times(steps))),
             ("outcomes", "What happened to each candidate; rejections are named by the rule that stopped them.",
              plot_outcomes(counts))]
    dispatch_rows, bucket_diffs = _dispatch_section(session, baseline, task, h)
    step_rows = [{"iteration": s.iteration, "commit": s.commit[:10], "outcome": s.outcome,
                  "speedup": s.speedup, "model": f"{s.agent}:{s.model}" if s.model else s.agent,
                  "description": s.description, "reason": s.reason} for s in steps]
    return Report(f"warpsmith report: {session.meta.task} ({session.id})", summary, plots, kept, step_rows,
                  bucket_rows, diff, dispatch_rows, bucket_diffs)


def _dispatch_section(session, baseline: str, task=None,
                      history: SessionHistory | None = None) -> tuple[list[dict], list[tuple[str, str]]]:
    """The routing table (which kernel runs in each bucket) and each per-bucket keep's diff."""
    if task is None:
        try:
            task = load_task(session.meta.task, check_null=False)
        except TaskError:
            return [], []
    if not task.buckets:
        return [], []
    ws, rows, diffs, seen = session.workspace, [], [], set()
    for r in dispatch_table(session, task, history):
        m = r.measurements or {}
        hi = "inf" if r.bucket.hi >= 2**61 else str(r.bucket.hi)
        rows.append({"bucket": r.bucket.name, "range": f"{r.bucket.dim} in [{r.bucket.lo}, {hi})", "runs": r.label,
                     "speedup": m.get("speedup"), "shapes": ", ".join(m.get("shapes", [])) or "-"})
        if r.kind == "bucket-keep" and r.commit not in seen:
            seen.add(r.commit)
            diffs.append((f"iteration {r.iteration} ({r.commit[:10]}), kept for buckets",
                          unified_diff(ws.source(baseline), ws.source(r.commit), "baseline/kernel.py",
                                       f"iter{r.iteration}/kernel.py")))
    return rows, diffs


def _fmt_speed(v: Any) -> str:
    return f"{v:.3f}x" if isinstance(v, (int, float)) and not math.isnan(v) else "n/a"


_CSS = """body{font-family:system-ui,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f1f3f5}figure{margin:1em 0}img{max-width:100%}figcaption{font-size:12px;color:#555}
pre{background:#f8f9fa;padding:1em;overflow-x:auto;font-size:12px}.add{color:#1b7f3b}.del{color:#b3261e}.hunk{color:#5c6bc0}"""


def _table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for _, h in cols) + "</tr>"]
    for r in rows:
        cells = []
        for k, _ in cols:
            v = r.get(k)
            cells.append(_fmt_speed(v) if k == "speedup" else html.escape("" if v is None else str(v)))
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(out) + "</table>"


KEPT_COLS = [("iteration", "iter"), ("commit", "commit"), ("what", "kept"), ("speedup", "speedup"),
             ("model", "agent:model"), ("packs", "packs (id@version#sha256)"), ("by", "decided by"),
             ("description", "description")]
STEP_COLS = [("iteration", "iter"), ("commit", "commit"), ("outcome", "outcome"), ("speedup", "speedup"),
             ("model", "agent:model"), ("description", "description"), ("reason", "veto reason")]
DISPATCH_COLS = [("bucket", "bucket"), ("range", "range"), ("runs", "runs"), ("speedup", "speedup at keep"),
                 ("shapes", "shapes measured")]
BUCKET_COLS = [("iteration", "iter"), ("commit", "commit"), ("buckets", "buckets"), ("speedups", "speedup per bucket"),
               ("by", "by")]


def _routing_note(rep: Report) -> str:
    """Under 'Routing per bucket': what the table is, or why there is none. A routing table means
    something only with per-bucket keeps: without them export writes the best kernel alone."""
    if not rep.dispatch:
        return "The task declares no [[buckets]]: one kernel runs everywhere."
    if not rep.buckets:
        return (f"No per-bucket keeps: `{command('sessions export')}` writes the best kernel, which runs "
                "everywhere; there is no dispatcher.")
    return (f"The dispatcher `{command('sessions export')}` writes runs, in each bucket, the kernel named here; "
            "shapes in no bucket run the task's default.")


def _routed(rep: Report) -> bool:
    return bool(rep.dispatch and rep.buckets)


def _diff_html(diff: str) -> str:
    out = []
    for line in diff.splitlines():
        cls = "add" if line.startswith("+") else "del" if line.startswith("-") else "hunk" if line.startswith("@@") else ""
        esc = html.escape(line)
        out.append(f'<span class="{cls}">{esc}</span>' if cls else esc)
    return "\n".join(out)


def render_html(rep: Report) -> str:
    figures = "\n".join(
        f'<figure id="plot-{name}"><img alt="{html.escape(name)}" src="data:image/png;base64,'
        f'{base64.b64encode(png).decode()}"><figcaption>{html.escape(cap)}</figcaption></figure>'
        for name, cap, png in rep.plots)
    summary = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rep.summary)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(rep.title)}</title><style>{_CSS}</style></head>
<body>
<h1>{html.escape(rep.title)}</h1>
<table>{summary}</table>
<h2>Plots</h2>
{figures}
<h2>Kept steps and their provenance</h2>
{_table(rep.kept, KEPT_COLS)}
<h2>Per-bucket keeps</h2>
{_table(rep.buckets, BUCKET_COLS)}
<h2>Routing per bucket</h2>
<p>{html.escape(_routing_note(rep))}</p>
{_table(rep.dispatch, DISPATCH_COLS) if _routed(rep) else ""}
<h2>Every candidate</h2>
{_table(rep.steps, STEP_COLS)}
<h2>Final diff against the baseline</h2>
<pre>{_diff_html(rep.diff) or '(best is the baseline: nothing kept)'}</pre>
{"".join(f"<h3>{html.escape(t)}</h3><pre>{_diff_html(dd)}</pre>" for t, dd in rep.bucket_diffs)}
</body></html>
"""


def _md_table(rows: list[dict], cols: list[tuple[str, str]]) -> str:
    if not rows:
        return "(none)\n"
    out = ["| " + " | ".join(h for _, h in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [_fmt_speed(r.get(k)) if k == "speedup" else str(r.get(k) if r.get(k) is not None else "")
                 for k, _ in cols]
        out.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(out) + "\n"


def render_markdown(rep: Report, out: Path) -> str:
    """Markdown with the PNGs written to <out stem>_files/ beside it (data URIs don't render on most hosts)."""
    files = out.parent / f"{out.stem}_files"
    files.mkdir(parents=True, exist_ok=True)
    parts = [f"# {rep.title}\n", "| | |\n|---|---|"] + [f"| {k} | {v} |" for k, v in rep.summary] + [""]
    parts.append("## Plots\n")
    for name, cap, png in rep.plots:
        (files / f"{name}.png").write_bytes(png)
        parts.append(f"![{name}]({files.name}/{name}.png)\n\n{cap}\n")
    parts += ["## Kept steps and their provenance\n", _md_table(rep.kept, KEPT_COLS),
              "## Per-bucket keeps\n", _md_table(rep.buckets, BUCKET_COLS),
              "## Routing per bucket\n", _routing_note(rep) + "\n",
              _md_table(rep.dispatch, DISPATCH_COLS) if _routed(rep) else "",
              "## Every candidate\n", _md_table(rep.steps, STEP_COLS),
              "## Final diff against the baseline\n", "```diff\n" + (rep.diff or "(nothing kept)\n") + "```\n"]
    for t, dd in rep.bucket_diffs:
        parts += [f"### {t}\n", "```diff\n" + dd + "```\n"]
    return "\n".join(parts)


def write_report(session, out: Path, fmt: str = "html", task=None) -> Path:
    rep = build_report(session, task)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = render_html(rep) if fmt == "html" else render_markdown(rep, out)
    out.write_text(text)
    return out

"""`warpsmith sessions show`: one row per candidate, read from the journal.

results.tsv has the decided candidates only, for scripts; a person also wants who decided, why a
candidate was vetoed, which buckets it was kept for, and the candidate still waiting for a decision
when the session stopped (a resume asks about it again).
"""
from __future__ import annotations

from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text

from harness.evaluate.records import Reason, Verdict
from harness.sessions.history import SessionHistory
from harness.invocation import command
from harness.rich_console import command_console, print_wide

# Decision.by in the journal -> who, in words.
WHO = {"human": "person", "auto": "auto", "policy": "harness"}


def candidate_rows(records: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Per proposed candidate, in iteration order: iteration, commit, description, verdict, geomean,
    decision, by, reason. A candidate without a Decision has decision 'undecided'."""
    out = []
    for st in SessionHistory.fold(records).steps.values():
        if not isinstance(st.iteration, int) or st.proposal is None:
            continue
        p = st.proposal
        row = {"iteration": str(st.iteration), "commit": str(p.get("commit", ""))[:10],
               "description": " ".join(str(p.get("description", "")).split()),
               "verdict": "not evaluated", "geomean": "", "decision": "undecided", "by": "", "reason": ""}
        if st.verdict is not None:
            v = st.verdict
            row["verdict"] = _verdict(v)
            g = v.geomean_speedup
            row["geomean"] = f"{g:.3f}x" if isinstance(g, (int, float)) else "n/a"
        if st.decision is not None:
            r = st.decision
            action = str(r.get("action", "?"))
            row.update(decision=action + (" (override)" if r.get("override") else ""),
                       by=WHO.get(str(r.get("by", "")), str(r.get("by", ""))),
                       reason=" ".join(str(r.get("reason", "")).split()))
        if st.bucket_keep is not None:  # (journalled after the iteration's Decision)
            r = st.bucket_keep
            row["decision"] = "kept for " + ", ".join(r.get("buckets") or [])
            row["by"] = WHO.get(str(r.get("by", "")), str(r.get("by", "")))
        out.append(row)
    return sorted(out, key=lambda row: int(row["iteration"]))


def _verdict(v: Verdict) -> str:
    if v.accepted:
        return "accepted"
    rules = [str(x.rule) for x in v.reasons or [] if isinstance(x, Reason) and x.rule]
    return f"rejected ({v.stage_shown}" + (f": {', '.join(dict.fromkeys(rules))})" if rules else ")")


def print_show(session, console=None) -> None:
    """The session's header and its candidates as an aligned table (rich; text is never read as markup)."""
    console = console or command_console()
    out = lambda s: console.print(Text(s))
    m = session.meta
    out(f"session {session.id}: task {m.task}, agent {m.agent}")
    out(f"  folder {session.root}")
    out(f"  best   {session.workspace.best[:12]}")
    if m.ideas:
        out("  ideas  " + "; ".join(m.ideas))
    rows = candidate_rows(session.journal.read())
    if not rows:
        out(f"  no candidates yet; continue it with `{command(f'sessions resume {session.id}')}`")
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    # Short cells never wrap; description and reason take what is left of a terminal's width (a pipe
    # gets every row on one line: harness/rich_console.py).
    for name, kw in (("iter", {"justify": "right", "no_wrap": True}), ("commit", {"no_wrap": True}),
                     ("description", {"ratio": 3, "min_width": 12}), ("verdict", {"min_width": 8}),
                     ("geomean", {"justify": "right", "no_wrap": True}), ("decision", {"min_width": 8}),
                     ("by", {"no_wrap": True}), ("veto reason", {"ratio": 2, "min_width": 10})):
        table.add_column(name, overflow="fold", **kw)
    for r in rows:
        undecided = r["decision"] == "undecided"
        cells = [r["iteration"], r["commit"], r["description"], r["verdict"], r["geomean"],
                 "undecided (asked again on resume)" if undecided else r["decision"], r["by"], r["reason"]]
        table.add_row(*(Text(c, style="bold" if undecided else "") for c in cells))
    print_wide(console, table)
    left = [r["iteration"] for r in rows if r["decision"] == "undecided"]
    if left:
        out(f"  left undecided when it stopped: #{', #'.join(left)}; "
            f"`{command(f'sessions resume {session.id}')}` asks again")

"""The one block a headless run ends with: the tally (counted from the rows of results.tsv, so the
two agree), the best candidate's speedup per shape with its noise band, where anything was timed how
far each bucket's kernel is from the roofline, the session folder, and the commands that come next
(export, report, resume)."""
from __future__ import annotations

from collections import Counter

from harness.evaluate.records import Verdict
from harness.evaluate.verdict import OUTCOMES
from harness.sessions.history import SessionHistory
from harness.invocation import command
from harness.sessions.journal import results_rows
from harness.profiling.roofline import MIN_ROOFLINE_US, NEAR_PCT, BucketRoof, bucket_roof
from harness.authoring.tasks import TaskError, load_task


def _best_lines(h: SessionHistory | list[dict]) -> list[str]:
    if not isinstance(h, SessionHistory):
        h = SessionHistory.fold(h)
    verdicts = {it: st.verdict for it, st in h.steps.items() if st.verdict is not None}
    keeps = h.keeps
    timed = any(v.timing_available for v in verdicts.values())
    if not keeps:
        why = "" if timed else "; timing unavailable (no GPU: nothing is kept on speed)" if verdicts else ""
        return [f"  best: the baseline (nothing kept){why}"]
    last = keeps[-1]
    v = verdicts.get(last.get("iteration")) or Verdict.empty()
    product, known = 1.0, True
    for k in keeps:
        g = (verdicts.get(k.get("iteration")) or Verdict.empty()).geomean_speedup
        if isinstance(g, (int, float)) and g > 0:
            product *= g
        else:
            known = False
    head = f"  best: #{last.get('iteration')} {str(last.get('commit', ''))[:10]}"
    if not v.timing_available:
        return [head + "; timing unavailable (kept without a measured speedup)"]
    g, band = v.geomean_speedup, v.noise_band_pct
    head += f", geomean {g:.3f}x" if isinstance(g, (int, float)) else ""
    head += f" ±{band:.1f}%" if isinstance(band, (int, float)) else ""
    head += " against the incumbent it replaced"
    if len(keeps) > 1:
        head += f"; {product:.3f}x the baseline over {len(keeps)} keeps" if known else \
            f"; against the baseline unknown ({len(keeps)} keeps, one without timing)"
    out = [head]
    for s in v.shapes:
        sp, noise = s.speedup, s.noise_pct
        val = f"{sp:.3f}x" if isinstance(sp, (int, float)) else "-"
        val += f" ±{noise:.1f}%" if isinstance(noise, (int, float)) else ""
        out.append(f"    {str(s.name or '?')[:28]:<28} {val}")
    return out


def _copy_tb_s(h: SessionHistory) -> float | None:
    """The hardware pack's copy bandwidth (TB/s) from the last prompt's packs: the roofline where a
    verdict lacks its measured `roofline_pct` (the tuner divides by the same)."""
    from harness.agents.tunespace import hardware_limits  # (tree-sitter): only when a summary is printed

    packs = next((r.get("packs") for r in reversed(h.records) if r.get("kind") == "PromptPacks"), None)
    specs = hardware_limits(packs or [])[1]
    return specs.get("measured_copy_tb_s") or specs.get("hbm_tb_s")


def _roof_text(roof: BucketRoof) -> str:
    shapes = " | ".join(f"{n} {p:.0f}%" + ("" if n in roof.counted else " (launch-bound)")
                        for n, p in roof.pcts.items())
    if roof.pct is None:
        return f"{shapes}; no shape long enough to count (under {MIN_ROOFLINE_US:g} us at the roofline)"
    gap = 100 - roof.pct
    head = (f"{roof.pct:.0f}% of the roofline, within {100 - NEAR_PCT:g}% of it: the tuner stops there"
            if roof.near else f"{roof.pct:.0f}% of the roofline, {gap:.0f} points from it")
    return f"{head} ({shapes})"


def _roofline_lines(session, h: SessionHistory) -> list[str]:
    """Per bucket of the task (or for the best kernel, without buckets): the kernel that runs there
    at the end (harness.model.dispatch's routing, as `sessions export` writes it) and how far it is from
    the roofline: % of copy bandwidth on each timed shape; the figure is the lowest over the shapes
    whose roofline time is at least MIN_ROOFLINE_US (harness.profiling.roofline), as the tuner's stop rule."""
    from harness.model.dispatch import dispatch_table, shape_dims  # (the dispatcher's writer): only at a summary

    verdicts = {it: st.verdict for it, st in h.steps.items() if st.verdict is not None}
    if not any(v.timing_available for v in verdicts.values()):
        return []  # nothing timed (no GPU): no roofline to stand against
    try:
        task = load_task(session.meta.task)
    except (TaskError, OSError):
        return []
    bw = _copy_tb_s(h)
    lines = []
    if task.buckets:
        for row in dispatch_table(session, task, h):
            if row.kind == "default":
                lines.append(f"    {row.bucket.name:<8} nothing kept: the task's default runs there")
                continue
            v = verdicts.get(row.iteration) or Verdict.empty()
            mine = [s.to_json() for s in v.shapes if row.bucket.contains(shape_dims(task, s))]  # (roofline reads dicts)
            roof = bucket_roof(mine, bw)
            who = f"#{row.iteration}" + (" (kept for this bucket)" if row.kind == "bucket-keep" else " (the best)")
            lines.append(f"    {row.bucket.name:<8} {who}: "
                         + (_roof_text(roof) if roof.pcts else "no roofline figure"))
    elif h.keeps:
        it = h.keeps[-1].get("iteration")
        roof = bucket_roof((verdicts.get(it) or Verdict.empty()).shape_dicts, bw)
        if roof.pcts:
            lines.append(f"    #{it}: " + _roof_text(roof))
    return ["  roofline, per bucket (% of copy bandwidth; the kernel each one runs now):" if task.buckets
            else "  roofline (% of copy bandwidth):"] + lines if lines else []


def summary_lines(session, ended=None) -> list[str]:
    """The block, as lines. `ended` is the run's SessionEnded event (None when interrupted)."""
    h = SessionHistory.of(session)
    rows = results_rows(h.records)
    counts = Counter(r["outcome"] for r in rows)
    started = ended.iterations if ended is not None else h.started
    how = f"session ended: {ended.reason}" if ended is not None else "session interrupted"
    lines = [f"{how} after {started} iteration{'' if started == 1 else 's'}",
             "  tally: " + ", ".join(f"{counts.get(k, 0)} {k}" for k in OUTCOMES)
             + f" ({len(rows)} decided, as in results.tsv)"]
    lines += _best_lines(h)
    lines += _roofline_lines(session, h)
    # `resume --iterations N` runs N more; without it a resume continues up to the session's own limit.
    more = 10 if ended is not None and ended.reason == "iterations done" else None
    lines += [f"  session folder: {session.root}",
              f"  export the best:  {command(f'sessions export {session.id} -o best_kernel.py')}",
              f"  report:           {command(f'report {session.id} -o report.html')}",
              f"  resume:           {resume_command(session.id, True, more)}"]
    return lines


def resume_command(session_id: str, headless: bool = True, iterations: int | None = None) -> str:
    """The command that continues a session (`warpsmith sessions resume`, warpsmith/commands/sessions.py),
    for `iterations` more when given."""
    return command(f"sessions resume {session_id}" + (f" --iterations {iterations}" if iterations else "")
                   + (" --headless" if headless else ""))

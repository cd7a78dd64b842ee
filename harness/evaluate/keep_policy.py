"""What a keep must also hold, beyond a geomean win (issue 25): stable timing and protected shapes.

Applied to every verdict after the decision rule (verdict.recommend) has spoken:

- Each timed shape gets `winner`: "candidate" (faster beyond its noise band), "incumbent" (slower
  beyond it) or "tie". Per-bucket keeps (harness.evaluate.buckets) go by it.
- Stable timing: a keep needs every shape's sample spread within verdict.SPREAD_MAX_PCT (reported
  per shape as `spread_pct`, the bound as `spread_bound_pct`), or the shape's change beyond its band
  and twice its spread (verdict.CLEAR_SPREADS: it can't change sign within it). The figures judged are
  the re-measured ones (every would-be keep is measured again in a fresh process); still noisy, it is
  not kept.
- Protected shapes (task.toml `protected`, long-context shapes by default): no keep may slow one
  beyond its noise band. A geomean win that does is recommended as a keep for the buckets it wins
  that leave the protected shapes out (the recommendation's `buckets`; `--auto` follows it), never a
  global keep; where the buckets allow none, revert. The reason says which shape and by how much:
  headless and the TUI's bench pane print it.
- Held-out shapes, hard inputs and contract cases unchecked (EvalOptions.heldout off): no keep.
"""
from __future__ import annotations

from harness.evaluate import verdict as vd
from harness.evaluate.buckets import bucket_results
from harness.authoring.tasks import Task


def _winner(e: dict) -> str | None:
    sp, band = e.get("speedup"), e.get("noise_pct")
    if not isinstance(sp, (int, float)) or not isinstance(band, (int, float)):
        return None
    gain = (sp - 1) * 100
    return "candidate" if gain > band else ("incumbent" if gain < -band else "tie")


def _revert(reason: str, **extra) -> dict:
    return {"action": "revert", "reason": reason, "can_keep": True, **extra}


def apply(v: dict, task: Task, heldout_checked: bool = True) -> dict:
    entries = v.get("shapes") or []
    for e in entries:
        w = _winner(e)
        if w:
            e["winner"] = w
    if v.get("timing_available"):
        v["spread_bound_pct"] = vd.SPREAD_MAX_PCT
    rec = v.get("recommendation") or {}
    if rec.get("action") != "keep":
        return v
    timed = [e for e in entries if e.get("speedup") is not None]
    if not heldout_checked:
        v["recommendation"] = _revert("held-out shapes, hard inputs and contract cases were not checked "
                                      "(EvalOptions.heldout off): a keep needs them")
        return v
    noisy = [e for e in timed if not vd.stable(e) and not vd.clear_beyond_spread(e)]
    if noisy:
        v["recommendation"] = _revert(
            f"noisy: {rec['reason']}, but the timing of "
            + ", ".join(f"{e['name']} spread {e.get('spread_pct', float('nan')):.1f}%" for e in noisy)
            + f" (interquartile range / median of the samples; a keep needs <= {vd.SPREAD_MAX_PCT:g}%) even when "
              "re-measured in a fresh process: not kept; evaluate it again on a quieter GPU")
        return v
    hurt = [e for e in timed if e.get("protected") and e.get("winner") == "incumbent"]
    if not hurt:
        return v

    names = {e["name"] for e in hurt}
    slower = ", ".join(f"{e['name']} ({e['speedup']:.3f}x, beyond its ±{e['noise_pct']:.1f}% band)" for e in hurt)
    head = (f"geomean {v.get('geomean_speedup') or 0:.3f}x wins overall, but it is slower on protected "
            f"shape{'s' if len(hurt) > 1 else ''} {slower}, which no keep may slow")
    wins = [r.bucket for r in bucket_results(task, v) if r.wins and not names & set(r.shapes)]
    if wins:
        v["recommendation"] = _revert(
            f"keep for bucket{'s' if len(wins) > 1 else ''} {', '.join(wins)} only, not globally: {head}; "
            f"elsewhere the incumbent stays", buckets=wins)
    else:
        why = ("the task declares no [[buckets]]" if not task.buckets
               else "it wins no bucket that leaves the protected shape out")
        v["recommendation"] = _revert(f"not kept: {head}; and {why}")
    return v

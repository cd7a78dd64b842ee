"""The decision rule: from paired timings to a speedup with a noise band, and keep or revert.

Speedup per shape = median(incumbent) / median(candidate), both from the same interleaved run.
Its noise band is the half-width of a bootstrap 99% interval (of the paired log-ratios of the
interleaved samples), never below a floor (NOISE_FLOOR_PCT) that stands for what one run can't
see: drift between processes and between runs. A win smaller than the band is no win.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from harness.evaluate.records import Finding, Verdict, as_verdict

NOISE_FLOOR_PCT = 1.0     # smallest band ever claimed (run-to-run drift a single run can't measure)
BIG_WIN = 1.5             # wins above this are re-measured in a fresh process before they count
BOOTSTRAP = 1000
CONFIDENCE = 0.99      # a 1-in-200 chance per shape that pure noise looks like a win


@dataclass
class ShapeStats:
    candidate_us: float
    incumbent_us: float
    speedup: float
    noise_pct: float


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def speedup_with_band(inc: list[float], cand: list[float], seed: int = 0) -> tuple[float, float]:
    """(speedup, noise band in %). Speedup is median(inc) / median(cand). The band is the
    half-width of a 99% bootstrap interval of that ratio, resampling whole pairs when the samples
    are pairs from one interleaved run (pairing keeps drift both sides saw out of the band).
    Never below NOISE_FLOOR_PCT."""
    if not inc or not cand:
        return float("nan"), float("nan")
    import numpy as np  # (here: the CLI and the TUI import this module; numpy only for the bootstrap)

    sp = median(inc) / max(median(cand), 1e-9)
    a, b = np.asarray(inc, dtype=float), np.asarray(cand, dtype=float)
    rng = np.random.default_rng(seed)
    if len(a) == len(b):  # resample pairs: both sides of a pair saw the same moment of the machine
        idx = rng.integers(0, len(a), size=(BOOTSTRAP, len(a)))
        mi, mc = np.median(a[idx], axis=1), np.median(b[idx], axis=1)
    else:
        mi = np.median(a[rng.integers(0, len(a), size=(BOOTSTRAP, len(a)))], axis=1)
        mc = np.median(b[rng.integers(0, len(b), size=(BOOTSTRAP, len(b)))], axis=1)
    ok = (mi > 0) & (mc > 0)
    if ok.sum() < 100:
        return sp, float("nan")
    logs = np.log(mi[ok] / mc[ok])
    tail = (1 - CONFIDENCE) / 2
    lo, hi = float(np.quantile(logs, tail)), float(np.quantile(logs, 1 - tail))
    half = (math.exp(hi) - math.exp(lo)) / 2 * 100
    return sp, max(half, NOISE_FLOOR_PCT)


def spread_pct(xs: list[float]) -> float:
    """Relative spread (max-min)/median in % of a list of medians from repeated runs."""
    if len(xs) < 2:
        return 0.0
    m = median(xs)
    return (max(xs) - min(xs)) / m * 100 if m > 0 else float("nan")


# A keep needs every shape's timing stable: the interquartile range of each side's samples within
# SPREAD_MAX_PCT of their median, or within SPREAD_FLOOR_US (a few-µs kernel jitters by more than
# 10% on a quiet GPU and is still measured well). Checked on the figures decided on: every
# would-be keep is re-measured in a fresh process first, so a noisy first run gets a second chance.
SPREAD_MAX_PCT = 10.0
SPREAD_FLOOR_US = 0.5
# ... unless the shape's change dwarfs its spread: a gain (or loss) beyond its noise band and at
# least CLEAR_SPREADS times its spread can't change sign within it. On the H200 a 2.9x faster
# candidate's many-short-rows samples spread 10-16% (the faster call, the larger the share of
# jitter), and the old rule reverted 1.3-1.55x geomean wins as "noisy". A/A pairs gain ~0: for
# them the rule is unchanged.
CLEAR_SPREADS = 2.0


def shape_spread(*sides: list[float]) -> dict:
    """{spread_pct, spread_us}: the larger interquartile range over the sides' samples, in % of
    that side's median and in µs."""
    import numpy as np  # numpy (~40 ms): --help loads this module

    pct, us = 0.0, 0.0
    for xs in sides:
        if len(xs) < 4:
            continue
        q1, med, q3 = (float(q) for q in np.percentile(np.asarray(xs, dtype=float), [25, 50, 75]))
        us = max(us, q3 - q1)
        pct = max(pct, (q3 - q1) / med * 100 if med > 0 else float("inf"))
    return {"spread_pct": round(pct, 3), "spread_us": round(us, 3)}


def stable(entry: dict) -> bool:
    """A shape's timing is stable enough to keep on (see SPREAD_MAX_PCT). Unmeasured: not stable."""
    pct, us = entry.get("spread_pct"), entry.get("spread_us")
    if pct is None or us is None:
        return False
    return pct <= SPREAD_MAX_PCT or us <= SPREAD_FLOOR_US


def clear_beyond_spread(entry: dict) -> bool:
    """The shape's change is beyond its noise band and CLEAR_SPREADS times its spread (see there)."""
    sp, band, pct = entry.get("speedup"), entry.get("noise_pct"), entry.get("spread_pct")
    if not all(isinstance(x, (int, float)) for x in (sp, band, pct)) or sp <= 0:
        return False
    change = abs(sp - 1) * 100 if sp >= 1 else abs(1 / sp - 1) * 100
    return change > band and change >= CLEAR_SPREADS * pct


def geomean(values: list[float], weights: list[float]) -> float | None:
    pairs = [(v, w) for v, w in zip(values, weights) if v and v > 0 and not math.isnan(v)]
    if not pairs:
        return None
    tw = sum(w for _, w in pairs)
    return math.exp(sum(w * math.log(v) for v, w in pairs) / tw)


def weighted_band(bands: list[float], weights: list[float]) -> float | None:
    """Band of a weighted geomean: the weighted mean of the shapes' bands.

    Not the root of weighted squares: that assumes the shapes' errors are independent, but drift
    (clocks, temperature, a neighbour on the box) moves every shape of one run together, and the
    smaller band let the A/A benchmark keep a kernel against itself (1 in 50 trials)."""
    pairs = [(b, w) for b, w in zip(bands, weights) if b is not None and not math.isnan(b)]
    if not pairs:
        return None
    tw = sum(w for _, w in pairs)
    return max(sum(w / tw * b for b, w in pairs), NOISE_FLOOR_PCT)


def recommend(*, correct: bool, guards_ok: bool, timing_available: bool, geomean_speedup: float | None,
              noise_band_pct: float | None, slower_shapes: list[str], note: str = "") -> dict:
    """keep only if correct, every guard passed, and faster beyond the noise (never on CPU)."""
    if not correct or not guards_ok:
        return {"action": "revert", "reason": "rejected: " + (note or "a correctness or guard check failed"),
                "can_keep": False}
    if not timing_available:
        return {"action": "revert", "can_keep": True,
                "reason": "correct, but no GPU here: timing is unavailable, so nothing is kept on speed "
                          "(the Triton interpreter's run time says nothing about the kernel's)"}
    if geomean_speedup is None or noise_band_pct is None:
        return {"action": "revert", "reason": "no timing result", "can_keep": True}
    gain = (geomean_speedup - 1) * 100
    if gain < -noise_band_pct:
        return {"action": "revert", "can_keep": True,
                "reason": f"slower: geomean {geomean_speedup:.3f}x, beyond the noise band (±{noise_band_pct:.1f}%)"
                          + (f"; {note}" if note else "")}
    if gain <= noise_band_pct:
        return {"action": "revert", "can_keep": True,
                "reason": f"geomean speedup {geomean_speedup:.3f}x is within the noise band (±{noise_band_pct:.1f}%)"
                          + (f"; {note}" if note else "")}
    msg = f"faster: geomean {geomean_speedup:.3f}x, beyond the noise band (±{noise_band_pct:.1f}%)"
    if slower_shapes:
        msg += "; slower on " + ", ".join(slower_shapes)
    if note:
        msg += f"; {note}"
    return {"action": "keep", "reason": msg, "can_keep": True}


# The per-shape time columns, worded the same wherever a verdict is printed (eval, headless).
CAND_US, BEST_US = "cand µs", "best µs"


def cannot_keep_reason(verdict: "dict | Verdict") -> str:
    """Why a candidate can never be kept (Verdict.cannot_keep_reason), of a verdict or its wire form."""
    return as_verdict(verdict).cannot_keep_reason


def static_warning_note(violation: "dict | Finding") -> str:
    """The verdict's note for a static violation that only warns (it goes to the agent and the
    person, not into the decision). `warpsmith eval` knows it by this, not by its words. Of a
    Finding or its wire form (the static stage writes the note before the verdict is read)."""
    v = violation if isinstance(violation, Finding) else Finding.from_json(violation)
    return f"static warning: {v.rule}: {v.message} (line {v.line})"


def outcome_of(verdict: "dict | Verdict") -> str:
    """One word for the agent's history (Verdict.outcome), of a verdict or its wire form."""
    return as_verdict(verdict).outcome


# A session's tally: one of these per decided candidate. results.tsv's `outcome` column, the
# headless run's summary and the TUI's bench all count with tally_outcome, so they agree.
OUTCOMES = ("kept", "reverted", "rejected", "incorrect", "crashed")


def tally_outcome(verdict: "dict | Verdict", action: str) -> str:
    """kept; else why it went (Verdict.tally), of a verdict or its wire form."""
    return as_verdict(verdict).tally(action)

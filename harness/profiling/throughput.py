"""Candidates per minute on each evaluation backend, on the same batch, and whether their verdicts
agree (bench/throughput.py is the command line; run() is all of it, ThroughputOptions its flags).

For each backend, a real session (harness.loop.Loop, script agent replaying the batch, every candidate
reverted so each is measured against the same baseline) runs the whole batch; the figure is
candidates evaluated per minute of wall time from the first proposal to the last decision, worker
start-up excluded (reported beside it). Then each backend's verdicts are compared with the first
backend's, candidate by candidate: accepted, stage, and reason rules must match. Last it prints a
short table: candidates a minute, the p50 time to verdict (all, accepted, rejected) and the p50 of
each phase (`phase_costs`), with the held-out checks' cost per candidate.

The batch: the prepared candidates in a folder (NN_name.py files), or n variants of the task's
kernel.py made by changing its tunables (BLOCK-like constants, num_warps) plus, with `broken`, one
deliberately wrong candidate (its result scaled) that every backend must reject.
"""
from __future__ import annotations

import itertools
import json
import re
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from harness import events as ev
from harness.agents.script import ScriptAgent
from harness.agents.tuner import apply, find_knobs, neighbours
from harness.authoring.tasks import TaskError, load_task
from harness.evaluate import EvalOptions
from harness.evaluate.backends import BackendUnavailable, make_evaluator
from harness.loop import DecisionReply, Loop
from harness.sessions.session import Session


@dataclass
class ThroughputOptions:
    """What to run (bench/throughput.py's flags, its defaults)."""
    task: str = "softmax"
    backends: str = "local,pool,ray"   # comma-separated --eval specs
    n: int = 10                        # batch size when generating variants
    candidates: Path | None = None     # a folder of prepared candidates instead
    broken: bool = False               # include one deliberately wrong candidate
    proposals: int = 2
    samples: int | None = None         # timed samples per side per shape (EvalOptions)
    shapes: str | None = None          # comma-separated shape names (default: all for the device)
    time_limit: float | None = None    # stop each backend's session after this many seconds
    json: Path | None = None           # write the figures here
    keep_dir: Path | None = None       # keep the sessions here (default: a temporary folder)


class RevertAll:
    """Measure only: every candidate is reverted, so all are measured against the same baseline."""

    def decide(self, request):
        return DecisionReply("revert", "auto")


def variants(source: str, n: int) -> list[tuple[str, str]]:
    """Up to n (name, source) variants of a kernel, changing its tunables two steps either way."""
    knobs = find_knobs(source)
    choices = []
    for k in knobs:
        vals = {k.value}
        frontier = [k]
        for _ in range(2):
            nxt = []
            for kn in frontier:
                for v in neighbours(kn):
                    if v not in vals:
                        vals.add(v)
                        nxt.append(type(kn)(kn.key, kn.name, v, kn.start, kn.end))
            frontier = nxt
        choices.append(sorted(vals, key=lambda v: (abs(v - k.value), v)))
    out = []
    for combo in itertools.product(*choices):
        if all(v == k.value for k, v in zip(knobs, combo)):
            continue
        name = "_".join(f"{k.name}{v}" for k, v in zip(knobs, combo))
        changed = sum(v != k.value for k, v in zip(knobs, combo))
        out.append((changed, name, apply(source, dict(zip(knobs, combo)))))
    # Fewest knobs changed first: the most plausible moves an agent would try (sort is stable).
    out.sort(key=lambda x: x[0])
    return [(name, src) for _, name, src in out[:n]]


def broken(source: str) -> tuple[str, str] | None:
    """The kernel with its result scaled by 1.5: correct-looking code that must fail correctness."""
    m = list(re.finditer(r"^(\s+)return (\w+)\s*$", source, flags=re.M))
    if not m:
        return None
    last = m[-1]
    return "broken_scaled", source[:last.start()] + f"{last.group(1)}return {last.group(2)} * 1.5" + source[last.end():]


def make_batch(task, n: int, with_broken: bool, dest: Path) -> Path:
    src = task.baseline_path.read_text()
    items = variants(src, n - (1 if with_broken else 0))
    if with_broken:
        b = broken(src)
        if b:
            items.insert(len(items) // 2, b)
    dest.mkdir(parents=True, exist_ok=True)
    for i, (name, text) in enumerate(items, 1):
        (dest / f"{i:02d}_{name}.py").write_text(text)
    return dest


def run_backend(task, spec: str, folder: Path, proposals: int, options: EvalOptions, base: Path,
                time_limit: float | None = None) -> dict:
    """One backend's session over the batch in `folder`: its figures and each candidate's verdict."""
    t0 = time.monotonic()
    evaluator = make_evaluator(spec)
    while any(w["state"] == "starting" for w in evaluator.workers()):  # start-up is not throughput
        time.sleep(0.1)
    start_s = time.monotonic() - t0
    workers = evaluator.workers()
    session = Session.create(task.name, "script", task.baseline_path.read_text(), base=base / spec.replace(":", "_"))
    verdicts: dict[int, dict] = {}
    files: dict[int, str] = {}

    def emit(e):
        if isinstance(e, ev.EvalResult):
            v = e.verdict
            verdicts[e.iteration] = v.to_json()  # (this bench's report is JSON: the verdict's wire form)
            # One line per verdict as it lands: a run cut short by a time limit still tells something.
            print(f"  [{spec} +{time.monotonic() - t1:6.1f}s] candidate {e.iteration}: "
                  f"{'accepted' if v.accepted else 'rejected at ' + v.stage_shown} "
                  f"in {v.wall_s}s on {(v.extra.get('worker') or {}).get('name', '?')}", flush=True)

    agent = ScriptAgent(folder)
    n = len(agent.files)
    t1 = time.monotonic()
    loop = Loop(session, task, agent, RevertAll(), evaluator, emit=emit, max_iterations=n,
                        proposals=max(proposals, evaluator.capacity()), options=options)
    stopper = None
    if time_limit:  # stop proposing and deciding; the table then covers the verdicts that landed
        stopper = threading.Timer(time_limit, loop.cancel.set)
        stopper.daemon = True
        stopper.start()
    loop.run()
    if stopper is not None:
        stopper.cancel()
    wall = time.monotonic() - t1
    for a in loop.history:
        files[a.iteration] = a.meta.get("script_file", "")
    by_file = {files[i]: v for i, v in verdicts.items() if i in files}
    # What the held-out shapes and hard inputs cost (issue 25): seconds per candidate that ran them,
    # and their share of those evaluations' wall time.
    costs = {f: phase_costs(v) for f, v in by_file.items()}
    walls = [v.get("wall_s") for v in by_file.values()]
    ttv = {"all": p50(walls), "accepted": p50([v.get("wall_s") for v in by_file.values() if v.get("accepted")]),
           "rejected": p50([v.get("wall_s") for v in by_file.values() if not v.get("accepted")])}
    ran = [v for v in by_file.values() if (v.get("phases_s") or {}).get("heldout") is not None]
    held = sum(v["phases_s"]["heldout"] for v in ran)
    return {"backend": spec, "workers": [f"{w['name']}(gpu {w['gpu']})" for w in workers], "start_s": round(start_s, 1),
            "heldout_s_per_candidate": round(held / len(ran), 2) if ran else None,
            "heldout_share_pct": round(held / max(sum(v.get("wall_s") or 0 for v in ran), 1e-9) * 100, 1) if ran else None,
            "wall_s": round(wall, 1), "candidates": len(by_file),
            "p50_time_to_verdict_s": {k: (round(x, 2) if x is not None else None) for k, x in ttv.items()},
            "p50_phases_s": {k: (round(x, 2) if x is not None else None)
                             for k, x in ((k, p50([c[k] for c in costs.values()])) for k in PHASES)},
            # Where the timing phase went (the verdict's timing_parts_s): p50 over the candidates timed.
            "p50_timing_parts_s": {k: round(p50([(v.get("timing_parts_s") or {}).get(k) for v in by_file.values()]), 2)
                                   for k in sorted({k for v in by_file.values() for k in (v.get("timing_parts_s") or {})})},
            "prewarmed": sum(c["prewarmed"] for c in costs.values()),
            "per_min": round(len(by_file) / wall * 60, 2) if wall > 0 else None,
            "verdicts": {f: summary(v) for f, v in sorted(by_file.items())}, "device": next(
                (v.get("device") for v in by_file.values() if v.get("device")), "")}


PHASES = ("sandbox", "start", "compile", "correctness", "compare", "heldout", "timing")


def phase_costs(v: dict) -> dict:
    """Where one evaluation's wall time went (seconds), from its verdict:
    sandbox      bwrap and Python up to the child's first line (paid by a pre-warmed spare, off the clock)
    start        what the evaluation waited for its child: imports, CUDA, the candidate's import
    compile      first call minus second call of each shape (Triton compiles on the first)
    correctness  the child's checks of the listed shapes, compile and compare excluded
    compare      the parent's reference, the outputs' transfer and their comparison (correctness stage)
    heldout      held-out shapes and hard inputs, all of it
    timing       the timing stage (the incumbent's child, batches, a re-measure of a win)"""
    ph, busy = v.get("phases_s") or {}, v.get("child_busy_s") or {}
    compile_s = 0.0
    for s in v.get("shapes") or []:
        first, second = (s.get("child_call_s") or [None, None])[:2]
        if first is not None and second is not None:
            compile_s += max(first - second, 0.0)
    corr = ph.get("correctness", 0.0)
    compare = max(corr - busy.get("correctness", corr), 0.0)
    return {"sandbox": (v.get("child_start") or {}).get("sandbox_s"),
            "start": sum(ph.get(k, 0.0) for k in ("spawn", "device", "import")),
            "compile": compile_s, "correctness": max(corr - compile_s - compare, 0.0), "compare": compare,
            "heldout": ph.get("heldout", 0.0), "timing": ph.get("timing", 0.0),
            "prewarmed": bool((v.get("child_start") or {}).get("prewarmed"))}


def p50(xs: list) -> float | None:
    xs = sorted(x for x in xs if x is not None)
    if not xs:
        return None
    m = len(xs) // 2
    return xs[m] if len(xs) % 2 else (xs[m - 1] + xs[m]) / 2


def summary(v: dict) -> dict:
    return {"accepted": v.get("accepted"), "stage": v.get("stage"),
            "rules": sorted({r.get("rule", "") for r in v.get("reasons", [])}),
            "action": (v.get("recommendation") or {}).get("action"),
            "geomean_speedup": v.get("geomean_speedup")}


def agree(a: dict, b: dict) -> list[str]:
    """Candidates whose verdicts differ (accepted, stage, rules); timing-dependent fields aside."""
    out = []
    for f in sorted(set(a) | set(b)):
        x, y = a.get(f), b.get(f)
        if x is None or y is None or (x["accepted"], x["stage"], x["rules"]) != (y["accepted"], y["stage"], y["rules"]):
            out.append(f)
    return out


def run(cfg: ThroughputOptions) -> int:
    """Every backend over one batch, their figures and verdicts printed (and written to cfg.json):
    0 when every backend's verdicts match the first's, 1 when they differ or none ran, 2 when the
    task or the batch can't be had."""
    try:
        task = load_task(cfg.task)
    except TaskError as e:
        print(f"throughput: {e}", file=sys.stderr)
        return 2
    base = cfg.keep_dir or Path(tempfile.mkdtemp(prefix="warpsmith-throughput-"))
    folder = cfg.candidates or make_batch(task, cfg.n, cfg.broken, base / "batch")
    if not folder.is_dir() or not list(folder.glob("*.py")):
        print(f"throughput: {folder}: no candidate .py files", file=sys.stderr)
        return 2
    options = EvalOptions()
    if cfg.samples:
        options.samples = cfg.samples
    if cfg.shapes:
        options.shapes = task.shape_names(cfg.shapes)
    results = []
    print(f"batch: {len(list(folder.glob('*.py')))} candidates in {folder}", flush=True)
    for spec in [s.strip() for s in cfg.backends.split(",") if s.strip()]:
        try:
            r = run_backend(task, spec, folder, cfg.proposals, options, base, cfg.time_limit)
        except BackendUnavailable as e:
            print(f"{spec}: skipped: {e}", flush=True)
            continue
        results.append(r)
        print(f"{spec:<10} {len(r['workers'])} worker(s) {', '.join(r['workers'])}: start {r['start_s']}s, "
              f"{r['candidates']} candidates in {r['wall_s']}s = {r['per_min']} candidates/min", flush=True)
        if r["p50_timing_parts_s"]:
            print(f"{'':<10} timing phase, p50 seconds by part: "
                  + ", ".join(f"{k} {x}" for k, x in r["p50_timing_parts_s"].items()), flush=True)
        if r["heldout_s_per_candidate"] is not None:
            print(f"{'':<10} held-out shapes + hard inputs: {r['heldout_s_per_candidate']} s per candidate that ran "
                  f"them, {r['heldout_share_pct']}% of those evaluations' wall time", flush=True)
    if not results:
        return 1
    ref = results[0]
    ok = True
    for r in results[1:]:
        diff = agree(ref["verdicts"], r["verdicts"])
        r["disagrees_with_" + ref["backend"]] = diff
        ok &= not diff
        print(f"{r['backend']} vs {ref['backend']}: " + ("same verdicts on every candidate" if not diff
                                                        else f"verdicts differ on {', '.join(diff)}"))
    print(f"\n{'candidate':<40} " + " ".join(f"{r['backend']:>16}" for r in results))
    for f in sorted(ref["verdicts"]):
        cells = []
        for r in results:
            v = r["verdicts"].get(f)
            cells.append("-" if v is None else ("ok " if v["accepted"] else f"no:{v['stage']} ")
                         + (f"{v['geomean_speedup']:.3f}x" if v and v.get("geomean_speedup") else ""))
        print(f"{f[:40]:<40} " + " ".join(f"{c:>16}" for c in cells))
    print(f"device: {ref['device']}")
    # Last, the short table (issue 18's targets: >= 10 candidates a minute, p50 time to verdict <= 6 s).
    print(f"\n{'backend':<8} {'cand/min':>8} {'p50 ttv':>8} {'p50 acc':>8} {'p50 rej':>8} {'warm':>5}  "
          + " ".join(f"{k:>11}" for k in PHASES) + f" {'heldout/cand':>12}")
    for r in results:
        t, ph = r["p50_time_to_verdict_s"], r["p50_phases_s"]
        cell = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
        print(f"{r['backend']:<8} {cell(r['per_min']):>8} {cell(t['all']):>8} {cell(t['accepted']):>8} "
              f"{cell(t['rejected']):>8} {r['prewarmed']:>2}/{r['candidates']:<2} "
              + " ".join(f"{cell(ph[k]):>11}" for k in PHASES)
              + f" {cell(r['heldout_s_per_candidate']):>12}")
    print("(p50 seconds per candidate; sandbox is paid by a pre-warmed spare before the evaluation when warm; "
          "heldout/cand: held-out shapes + hard inputs)")
    if cfg.json:
        cfg.json.write_text(json.dumps({"task": task.name, "results": results}, indent=1))
    return 0 if ok else 1


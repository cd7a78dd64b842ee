"""The timing stage, parent side (GPU only). The decision path is run_timing: parent-clock batches
(harness/evaluate/parent_clock.py) with the incumbent in a child of its own. judge_shape/time_pair
judge the child-reported interleaved samples of harness/evaluate/timing.py (timing_trust.py's
spread and detection runs, and their tests); nothing decides on them any more.

Checks that turn a timing into a rejection (stage "timing"):
  timed-outputs-correct  an output of a timed call (candidate or incumbent) was wrong
  timer-disagrees        CUDA events and the host clock disagree, or the samples add up to more
                         time than the parent saw pass
  impossible-time        faster than bytes / (measured copy bandwidth x 1.1) or flops / peak
  incumbent-slowed       the incumbent ran slower next to the candidate than alone, before the
                         candidate was imported (a candidate can't win by slowing the incumbent)
A would-be keep (or a geomean above verdict.BIG_WIN) is re-measured whole in fresh children before it
counts; otherwise only the shapes above BIG_WIN are (to_remeasure).
"""
from __future__ import annotations

import atexit
import hashlib
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness import sourcefile
from harness.evaluate import verdict as vd
from harness.evaluate.parent_clock import roofline_and_floor
from harness.evaluate import parent_clock, prewarm
from harness.evaluate.correctness import _as_out, _make, elementwise, input_bytes, n_buffers, sampled_rows
from harness.evaluate.process import ChildFailed, ChildProcess, derive_seed
from harness.authoring.tasks import Shape, Task, compare

# torch is imported inside each function, for start-up time (seconds): importing this module (the runner
# and the tests do) costs no torch; the evaluation pays for it once, on first use.

if TYPE_CHECKING:
    from harness.evaluate.process import EvalOptions, _Run

FLOOR_BW_MARGIN = 1.10      # nothing moves bytes faster than 1.1x the measured device copy rate
SCREEN_ALONE_BATCHES = 5    # the incumbent's batches alone before a screen's rounds (8 before a full measurement)
SLOWED_MIN_PCT = 10.0       # incumbent-slowed fires above max(this, 3x the noise band)


def _floor_us(ref_mod: ModuleType, task: Task, shape: Shape, dev: dict) -> tuple[float | None, str]:
    import torch  # torch on first use, as in correctness (tests import this module)

    floors = []
    dt = getattr(torch, task.dtypes[0])
    bw = dev.get("copy_bw_Bps")
    if callable(getattr(ref_mod, "bytes_moved", None)) and bw:
        floors.append((ref_mod.bytes_moved(shape.dims, dt) / (bw * FLOOR_BW_MARGIN) * 1e6, "bytes / copy bandwidth"))
    peak = dev.get("peak_tflops")
    if callable(getattr(ref_mod, "flops", None)) and peak:
        floors.append((ref_mod.flops(shape.dims) / (peak * 1e12) * 1e6, "flops / peak"))
    if not floors:
        return None, ""
    return max(floors)


def time_pair(child: "ChildProcess", task: Task, ref_mod: ModuleType, shape: Shape, dev: dict,
              opts: "EvalOptions", seed_of: Any) -> tuple[dict, float]:
    tol = task.tolerance[task.dtypes[0]]
    nb = n_buffers(input_bytes(ref_mod, task, shape), dev.get("l2_bytes", 50 * 2**20))
    t0 = time.monotonic()
    r, _ = child.request({"op": "time", "dims": shape.dims, "roles": ["incumbent", "candidate"],
                          "seeds": [seed_of("t", i) for i in range(nb + 1)], "samples": opts.samples,
                          "warmup": opts.warmup, "atol": tol.atol, "rtol": tol.rtol,
                          "l2_bytes": dev.get("l2_bytes"), "graph": task.cuda_graphs,
                          "order_seed": seed_of("order")}, opts.run_timeout_s)
    return r, time.monotonic() - t0


def judge_shape(run: "_Run", entry: dict, r: dict, parent_wall_s: float, floor: tuple[float | None, str],
                baseline_us: float | None, dev: dict, bytes_moved: float | None) -> None:
    tag = f"[{entry['name']}] "
    if not r.get("ok"):
        run.reject("timing", "crashed", f"{tag}timing failed: {r.get('error')}")
        return
    for o in r.get("observed", []):
        run.reject("timing", o["rule"], tag + o["message"])
    inc, cand = r["roles"]["incumbent"], r["roles"]["candidate"]
    for who, d in (("candidate", cand), ("incumbent", inc)):
        if d["bad"]:
            run.reject("timing", "timed-outputs-correct",
                       f"{tag}{d['bad']} of {d['checked']} timed {who} outputs were wrong (correct during the "
                       "checks, wrong while being timed)")
    total_us = sum(inc["event_us"]) + sum(cand["event_us"]) + sum(inc.get("graph_us", [])) + \
        sum(cand.get("graph_us", []))
    if total_us / 1e6 > parent_wall_s * 1.05 + 0.002:
        run.reject("timing", "timer-disagrees",
                   f"{tag}the samples add up to {total_us / 1e6:.3f} s but only {parent_wall_s:.3f} s passed")
    for who, d in (("candidate", cand), ("incumbent", inc)):
        ev = vd.median(d["event_us"])
        ev_all = vd.median(d.get("event_all_us") or d["event_us"])
        wall = vd.median(d["wall_us"])
        # The all-streams events bracket the call and a device-wide sync, like the host clock
        # does (both net of an empty sample's overhead): they can't be far apart either way.
        if ev_all < 0.5 * wall - 50:
            run.reject("timing", "timer-disagrees",
                       f"{tag}{who}: CUDA events say {ev_all:.1f} µs, the host clock {wall:.1f} µs (after a device sync)")
        if ev_all > 1.5 * wall + 50:
            run.reject("timing", "timer-disagrees",
                       f"{tag}{who}: CUDA events say {ev_all:.1f} µs, more than the host clock's {wall:.1f} µs")
        # Work still running on another stream once the call's own stream is done.
        if ev_all - ev > max(50.0, 0.5 * ev):
            run.reject("timing", "no-side-streams",
                       f"{tag}{who}: the call's stream finished after {ev:.1f} µs but the device only after "
                       f"{ev_all:.1f} µs: work was left running on another stream")
    c_med, i_med = vd.median(cand["event_us"]), vd.median(inc["event_us"])
    sp, band = vd.speedup_with_band(inc["event_us"], cand["event_us"])
    entry.update(candidate_us=round(c_med, 3), incumbent_us=round(i_med, 3), speedup=round(sp, 4),
                 noise_pct=round(band, 3),
                 candidate_graph_us=round(vd.median(cand["graph_us"]), 3) if cand.get("graph_us") else None,
                 incumbent_graph_us=round(vd.median(inc["graph_us"]), 3) if inc.get("graph_us") else None,
                 **vd.shape_spread(cand["event_us"], inc["event_us"]))  # a keep needs it under a bound
    roofline_and_floor(run, entry, tag, c_med, floor, dev, bytes_moved)
    if baseline_us:
        slowed = (i_med / baseline_us - 1) * 100
        if slowed > max(SLOWED_MIN_PCT, 3 * band):
            run.reject("timing", "incumbent-slowed",
                       f"{tag}the incumbent took {i_med:.1f} µs next to the candidate but {baseline_us:.1f} µs "
                       f"alone before the candidate was imported (+{slowed:.1f}%)")
    entry["incumbent_alone_us"] = round(baseline_us, 3) if baseline_us else None


def run_timing(run: "_Run", v: dict, child: "ChildProcess", task: Task, ref_mod: ModuleType, shapes: list[Shape],
               dev: dict, baseline: dict[str, float], opts: "EvalOptions", secret: int, candidate: Any,
               incumbent: Any) -> bool:
    """Parent-clock timing (harness/evaluate/parent_clock.py): the candidate's child from the
    correctness stage against an incumbent child the candidate never shared. False when there
    was no timing (the incumbent itself is broken: not the candidate's fault, said in a note)."""

    screen = opts.screen_samples if opts.screen_samples and opts.screen_samples < opts.samples else None
    first = replace(opts, samples=screen) if screen else opts
    try:
        _time_shapes(run, child, task, ref_mod, shapes, dev, first, incumbent,
                     lambda s: (lambda *p: derive_seed(secret, s.name, "t", *p)), reuse_incumbent=True,
                     screen=bool(screen))
    except IncumbentBroken as e:
        run.notes.append(f"incumbent {incumbent} failed to import ({e}); timing skipped")
        return False
    except ChildFailed as e:
        run.reject("timing", e.rule, f"timing failed: {e.message}")
        return True
    _summarise(v, run, shapes)
    v["timing_clock"] = "parent"
    v["timing_samples"] = first.samples
    if screen:
        v["screened"] = True
        if not promising(v, run.shapes, task):
            run.notes.append(f"screened with {screen} samples a side: {v.get('geomean_speedup')}x "
                             f"(±{v.get('noise_band_pct')}%) shows no win worth a full measurement; not measured "
                             f"further")
            return True
    again = to_remeasure(v, run.shapes, shapes, screened=bool(screen))
    if again and (opts.remeasure_big_wins or screen) and not run.reasons:
        _remeasure(run, v, task, ref_mod, shapes, again, dev, opts, secret, candidate, incumbent)
        rest = to_remeasure(v, run.shapes, shapes)  # non-empty when a partial re-measure made a would-be keep
        if rest and not run.reasons:
            _remeasure(run, v, task, ref_mod, shapes, rest, dev, opts, secret, candidate, incumbent)
    return True


def would_keep(v: dict) -> bool:
    return v.get("geomean_speedup") is not None and v.get("noise_band_pct") is not None \
        and (v["geomean_speedup"] - 1) * 100 > v["noise_band_pct"]


def promising(v: dict, entries: list[dict], task: Task | None = None) -> bool:
    """After a screen (EvalOptions.screen_samples): worth the full measurement that decides. A geomean
    gain beyond half its band (a would-be keep, and the smaller wins a screen's wider band would hide:
    an A/A pair passes about one time in ten), or a bucket of the task's whose every shape the screen
    already finds faster beyond its band (a per-bucket keep goes by those). Not any one shape beyond
    its band: with eight shapes (DeepSeek V4) the baseline against itself passed that on the H200 and
    was measured again whole."""
    g, band = v.get("geomean_speedup"), v.get("noise_band_pct")
    if g is not None and band is not None and (g - 1) * 100 > band / 2:
        return True

    def won(e: dict) -> bool:
        sp, b = e.get("speedup"), e.get("noise_pct")
        return isinstance(sp, (int, float)) and isinstance(b, (int, float)) and (sp - 1) * 100 > b

    for b in (task.buckets if task is not None else []):
        mine = [e for e in entries if isinstance(e.get("dims"), dict) and b.contains(e["dims"])]
        if mine and all(won(e) for e in mine):
            return True
    return False


def to_remeasure(v: dict, entries: list[dict], shapes: list[Shape], screened: bool = False) -> list[Shape]:
    """The shapes to measure again in fresh processes before the figures count. Every would-be keep is
    confirmed whole by a second, independent measurement (one run's band is a 99% interval: one
    candidate in a few hundred that is no faster would otherwise be kept); a geomean above BIG_WIN
    likewise. Otherwise only the shapes above BIG_WIN, whose figures a per-bucket keep would go by:
    the H200's tuner runs spent half their timing re-measuring all four shapes of candidates 0.8x
    overall that were 2x on one. Shapes re-measured already (`remeasured`) are not asked again."""
    if screened or would_keep(v) or (v.get("geomean_speedup") or 0) > vd.BIG_WIN:
        # (a screened candidate gets here only when promising: the full measurement decides, every shape)
        pick = {s.name for s in shapes}
    else:
        pick = {e["name"] for e in entries if (e.get("speedup") or 0) > vd.BIG_WIN}
    done = {e["name"] for e in entries if e.get("remeasured")}
    return [s for s in shapes if s.name in pick and s.name not in done]


class IncumbentBroken(Exception):
    pass


def _output_checker(task: Task, ref_mod: ModuleType, shape: Shape) -> Any:
    """Compares a timed output, received as bytes, with the reference computed here."""

    def check(tensors: list, n_out: int, seed: int, rows_seed: int | None = None,
              min_bytes: int | None = None) -> str | None:
        xs, exp = _make(ref_mod, task, shape, seed, True)
        exp = sampled_rows(exp, rows_seed, min_bytes)  # the same rows the child sent, of the reference
        return compare(task, ref_mod, _as_out(tensors, n_out), exp, tuple(xs), task.dtypes[0])

    return check


def _time_shapes(run: "_Run", cand_child: "ChildProcess", task: Task, ref_mod: ModuleType, shapes: list[Shape],
                 dev: dict, opts: "EvalOptions", incumbent: Any, seeds_for: Any, reuse_incumbent: bool = False,
                 screen: bool = False) -> None:
    import torch  # torch on first use, as in correctness (tests import this module)

    if torch.cuda.is_available():
        # This process's own allocator cache (the correctness stage's references) is memory the
        # batches may use: they are sized from the free memory the incumbent's child reports.
        torch.cuda.empty_cache()
    inc_child = INCUMBENTS.take(task, Path(incumbent), opts) if reuse_incumbent else _incumbent_child(task, incumbent, opts)
    ok = False
    try:
        by_name = {e["name"]: e for e in run.shapes}
        for shape in shapes:
            time_shape(run, by_name[shape.name], {"incumbent": inc_child, "candidate": cand_child}, task, ref_mod,
                       shape, dev, opts, seeds_for(shape), alone_batches=SCREEN_ALONE_BATCHES if screen else None)
        ok = True
    finally:
        if reuse_incumbent:
            INCUMBENTS.give_back(inc_child, healthy=ok and not _incumbent_failed(run))
        else:
            inc_child.close()


def _incumbent_child(task: Task, incumbent: Any, opts: "EvalOptions") -> "ChildProcess":
    """A child with the incumbent imported: it never holds candidate code."""
    # opts.on_gpu is resolved (True) on a GPU by now; False only where a test drives this in the interpreter.
    inc_child = prewarm.take(task, bool(opts.on_gpu), opts)
    try:
        hello = inc_child.start(opts.import_timeout_s)
        if not hello.get("ok"):
            raise ChildFailed("setup-failed", f"the incumbent's child: {hello.get('error')}")
        # The incumbent's bytes as read here, compiled as UTF-8 like the candidate's (harness/sourcefile.py).
        r, _ = inc_child.request({"op": "import", "role": "incumbent", "path": str(inc_child.stage(incumbent)),
                                  "sha256": sourcefile.sha256(Path(incumbent).read_bytes())}, opts.import_timeout_s)
        if not r.get("ok"):
            raise IncumbentBroken(r.get("error"))
    except BaseException:
        inc_child.close()
        raise
    return inc_child


def _incumbent_failed(run: "_Run") -> bool:
    """A timing rejection that names the incumbent: its child is not reused (a crash may leave it broken)."""
    return any("incumbent" in r["message"] and r["rule"] in ("crashed", "timed-outputs-correct", "timer-disagrees")
               for r in run.reasons)


class IncumbentChildren:
    """The incumbent's child kept from one evaluation to the next while the incumbent is the same file
    (issue 35): a search judges many candidates against one incumbent, and each evaluation spent its
    start, import and compile again (on the H200 ~1.5 s of softmax's, 3-8 s of a DeepSeek V4 task's,
    with the capture of its first batch of each shape). What keeps this honest:
    - the child only ever holds the incumbent (issue 17: one candidate per process); the key is the
      incumbent's bytes, task and environment, so a keep (a new incumbent) starts a new child;
    - its figures are measured anew in every evaluation, interleaved with the candidate's as before
      (the incumbent's figures are never reused), and its batch's memory is handed back between
      evaluations (`release`), so two children never hold a task's big inputs unless they are timing;
    - the re-measure of a would-be keep runs in two fresh processes, this one not among them;
    - a child whose evaluation ended in a timing failure naming the incumbent is closed, not reused.
    One per key, checked out by one evaluation at a time (evaluations may run in threads)."""

    def __init__(self) -> None:
        self._idle: dict[tuple, "ChildProcess"] = {}
        self._keys: dict[int, tuple] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(task: Task, incumbent: Path, opts: "EvalOptions") -> tuple:
        return (str(task.root), task.name, hashlib.sha256(incumbent.read_bytes()).hexdigest(),
                prewarm.key(bool(opts.on_gpu), opts), opts.run_timeout_s)

    def take(self, task: Task, incumbent: Path, opts: "EvalOptions") -> "ChildProcess":
        key = self._key(task, incumbent, opts)
        with self._lock:
            child = self._idle.pop(key, None)
            stale = [k for k in self._idle if k[:2] == key[:2]]  # the same task's former incumbents
            old = [self._idle.pop(k) for k in stale]
        for c in old:
            c.close()
        if child is not None and child.proc.poll() is not None:
            child.close()
            child = None
        if child is None:
            child = _incumbent_child(task, incumbent, opts)
            child.reused = 0
        else:
            child.reused = getattr(child, "reused", 0) + 1
        with self._lock:
            self._keys[id(child)] = key
        return child

    def give_back(self, child: "ChildProcess", healthy: bool) -> None:
        with self._lock:
            key = self._keys.pop(id(child), None)
        if healthy and key is not None and child.proc.poll() is None:
            try:
                r, _ = child.request({"op": "release"}, 60)
                healthy = bool(r.get("ok"))
            except ChildFailed:
                healthy = False
        if healthy and key is not None:
            with self._lock:
                spare = self._idle.pop(key, None)
                self._idle[key] = child
            if spare is not None:
                spare.close()
            return
        child.close()

    def close(self) -> None:
        with self._lock:
            kids = list(self._idle.values())
            self._idle.clear()
        for c in kids:
            c.close()


INCUMBENTS = IncumbentChildren()
atexit.register(INCUMBENTS.close)


def time_shape(run: "_Run", entry: dict, children: dict[str, "ChildProcess"], task: Task, ref_mod: ModuleType,
               shape: Shape, dev: dict, opts: "EvalOptions", seed_of: Any, alone_batches: int | None = None) -> dict:
    """One shape timed and judged by the parent's clock: `entry` gets the figures, `run` any rejection.
    Public for timing_trust.py (bench/timing_trust.py), whose A/A must go through exactly this (it keeps its two
    children across trials, where an evaluation starts fresh ones). Returns parent_clock.measure's dict."""
    import torch  # torch on first use, as in correctness (tests import this module)

    # A task's own compare (e.g. top-k sets) gets whole outputs; elementwise ones a sample of rows.
    m = parent_clock.measure(children, task, ref_mod, shape, opts, seed_of, _output_checker(task, ref_mod, shape),
                             input_bytes(ref_mod, task, shape), sample_rows=elementwise(ref_mod),
                             alone_batches=alone_batches)
    for note in m.get("notes", []):
        run.notes.append(f"[{shape.name}] {note}")
    for part, sec in m["parts_s"].items():
        run.timing_parts_s[part] = round(run.timing_parts_s.get(part, 0.0) + sec, 3)
    dt = getattr(torch, task.dtypes[0])
    bm = ref_mod.bytes_moved(shape.dims, dt) if callable(getattr(ref_mod, "bytes_moved", None)) else None
    if entry.get("speedup") is not None:
        entry["first_speedup"] = entry["speedup"]
    parent_clock.judge(run, entry, m, _floor_us(ref_mod, task, shape, dev), dev, bm)
    return m


def _summarise(v: dict, run: "_Run", shapes: list[Shape]) -> None:
    weights = {s.name: s.weight for s in shapes}
    timed = [e for e in run.shapes if e.get("speedup")]
    v["geomean_speedup"] = vd.geomean([e["speedup"] for e in timed], [weights[e["name"]] for e in timed])
    v["noise_band_pct"] = vd.weighted_band([e["noise_pct"] for e in timed], [weights[e["name"]] for e in timed])
    if v["geomean_speedup"] is not None:
        v["geomean_speedup"] = round(v["geomean_speedup"], 4)
    if v["noise_band_pct"] is not None:
        v["noise_band_pct"] = round(v["noise_band_pct"], 3)


def _remeasure(run: "_Run", v: dict, task: Task, ref_mod: ModuleType, shapes: list[Shape], again: list[Shape],
               dev: dict, opts: "EvalOptions", secret: int, candidate: Any, incumbent: Any) -> None:
    """A big win counts only if two fresh processes, fresh seeds and fresh inputs show it again,
    timed the same way (the parent's clock, the incumbent in a process of its own): the shapes
    `again` are timed anew, the verdict's summary over all `shapes` recomputed."""

    first = v["geomean_speedup"]
    child = prewarm.take(task, bool(opts.on_gpu), opts)
    try:
        child.start(opts.import_timeout_s)
        r, _ = child.request({"op": "import", "role": "candidate", "path": str(child.stage(candidate)),
                              "sha256": v.get("candidate_sha256")}, opts.import_timeout_s)
        if not r.get("ok"):
            raise ChildFailed("crashed", f"re-measure: the candidate failed to import: {r.get('error')}")
        _time_shapes(run, child, task, ref_mod, again, dev, opts, incumbent,
                     lambda s: (lambda *p: derive_seed(secret, "remeasure", s.name, *p)))
        names = {s.name for s in again}
        for e in run.shapes:
            if e["name"] in names:
                e["remeasured"] = True
        _summarise(v, run, shapes)
        which = "" if len(again) == len(shapes) else f" ({', '.join(sorted(names))})"
        run.notes.append(f"a win ({first}x) was re-measured in fresh processes{which}: {v['geomean_speedup']}x; "
                         "the re-measured figures are the ones reported and decided on")
    except (ChildFailed, IncumbentBroken) as e:
        run.reject("timing", getattr(e, "rule", "crashed"),
                   f"re-measuring a big win in a fresh process failed: {getattr(e, 'message', e)}")
    finally:
        child.close()

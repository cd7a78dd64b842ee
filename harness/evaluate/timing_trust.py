"""Can the timing verdict be trusted? Three numbers, from the evaluator's own timing path
(bench/timing_trust.py is the command line; --simulate there is run_simulated here).

1. A/A false-keep rate: the same kernel as incumbent and candidate, `trials` times (fresh seeds,
   fresh inputs each trial), timed as `warpsmith eval` decides: the parent's clock over batches,
   the incumbent in a child of its own (parent_clock.py; aa_clock "child" for the old interleaved
   samples in one child); each trial is judged and decided by the evaluator's own code
   (timing_stage.time_shape, runner.timed_verdict: every timing rejection rule, the keep policy).
   A trial is a false keep when that decision is keep twice in a row (the evaluator re-measures a
   would-be keep); a rejection of the same kernel (timer-disagrees, impossible-time...) is a harness
   bug and counted too. Goal: 0 and 0. With aa_shape "all" over each task: issue 19's per-task A/A.
2. Spread of repeated medians for a kernel of >= 100 µs: `repeats` runs of the same timing on a
   big shape; (max - min) / median of the candidate's medians. Goal: <= 1%.
3. Detection of a real 3% improvement: the incumbent is the baseline plus extra HBM reads (from a
   buffer larger than L2) sized so that it is truly about 3% slower, measured with many samples;
   the rate at which the ordinary rule keeps the faster one is reported.
Everything goes through this package's child and timing code (the same process, L2 flush, input
rotation and all-stream sync as `warpsmith eval`). print_table() writes the figures as a table.
"""
from __future__ import annotations

import math
import random
import secrets
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from harness.authoring.tasks import load_task
from harness.evaluate import timing_stage
from harness.evaluate import verdict as vd
from harness.evaluate.correctness import input_bytes, n_buffers
from harness.evaluate.process import _Run
from harness.evaluate.runner import ChildProcess, EvalOptions, derive_seed, timed_verdict


@dataclass
class TrustOptions:
    """What to measure, and how much (bench/timing_trust.py's options, its defaults)."""
    task: str = "softmax"
    trials: int = 50              # A/A trials
    samples: int = 40             # timed samples per side, as `warpsmith eval` uses
    aa_shape: str = "4k x 4k"     # a shape name, or "all" (round-robin over the task's shapes)
    only_aa: bool = False         # the A/A trials alone (no spread, no detection)
    aa_clock: str = "parent"      # parent: the evaluator's decision path; child: the old in-child samples
    # Which processes the parent-clock A/A times (a lean towards one process is a bias the decision inherits):
    # setup: the candidate in the process that did the setup (imported both roles), the incumbent in one of its own;
    # fresh: each role in a process of its own that imported only it; swapped: the incumbent in the setup process,
    # the candidate in a fresh one (a lean that follows the process flips; one that follows the role doesn't).
    aa_processes: str = "setup"
    spread_shape: str = "long rows 128k"
    repeats: int = 10
    detect_shape: str = "long rows 128k"
    detect_trials: int = 20
    calib_samples: int = 200
    gain_pct: float = 3.0


class TrustError(RuntimeError):
    """A timing request failed, or a timed output was wrong: no figure can be drawn from it."""


# The baseline with an extra pass of EXTRA_COLS reads per row from a pad buffer larger than L2;
# `acc * 0.0` keeps the loads (the compiler can't fold it: acc could be inf/NaN) and adds 0.
SLOW_VARIANT = '''
import torch
import triton
import triton.language as tl

EXTRA_COLS = {extra}
BLOCK = 1024
_pad = {{}}


@triton.jit
def _softmax_slow(x_ptr, y_ptr, pad_ptr, n_cols, n_pad, x_stride, y_stride, EXTRA: tl.constexpr,
                  BLOCK: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * x_stride
    y_row = y_ptr + row * y_stride
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        alpha = tl.where(m_new == -float("inf"), 0.0, tl.exp(m - m_new))
        s = s * alpha + tl.where(m_new == -float("inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.where(m == -float("inf"), 0.0, tl.exp(m - row_max)), axis=0)
    acc = tl.zeros([BLOCK], tl.float32)
    base = (row.to(tl.int64) * EXTRA) % n_pad
    for start in range(0, EXTRA, BLOCK):
        idx = (base + start + tl.arange(0, BLOCK)) % n_pad
        acc += tl.load(pad_ptr + idx, mask=start + tl.arange(0, BLOCK) < EXTRA, other=0.0).to(tl.float32)
    row_sum = row_sum + tl.sum(acc, axis=0) * 0.0
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(y_row + cols, y.to(y_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax(x):
    x = x.contiguous()
    rows, cols = x.shape
    pad = _pad.get(x.device)
    if pad is None:
        pad = _pad[x.device] = torch.ones(256 * 2**20, dtype=torch.bfloat16, device=x.device)  # 512 MB > L2
    y = torch.empty_like(x)
    _softmax_slow[(rows,)](x, y, pad, cols, pad.numel(), x.stride(0), y.stride(0), EXTRA=max(EXTRA_COLS, 1),
                           BLOCK=BLOCK, num_warps=4)
    return y
'''


class Decision(NamedTuple):
    keep: bool
    speedup: float
    band: float
    entry: dict
    again: bool  # the evaluator would measure this again in fresh processes and decide on that alone


def decide(task, run: _Run, shape) -> Decision:
    """The evaluator's decision on one timed shape (runner.timed_verdict: its summary, recommendation
    and keep policy, not a copy of them), and whether it would re-measure first (timing_stage.to_remeasure:
    a would-be keep, before the keep policy, or a big win). Rejections stay in run.reasons."""
    v = timed_verdict(run, task, [shape])
    e = run.shapes[0]
    return Decision((v["recommendation"] or {}).get("action") == "keep", e.get("speedup") or float("nan"),
                    v.get("noise_band_pct") or float("nan"), e, bool(timing_stage.to_remeasure(v, run.shapes, [shape])))


def confirmed(first: Decision, measure_again) -> Decision:
    """As the evaluator decides: where it would re-measure, the second measurement alone decides."""
    return measure_again() if first.again else first


def keep(task, shape, inc: list[float], cand: list[float], seed: int) -> Decision:
    """decide() on samples timed elsewhere (the child's interleaved events, or simulated noise)."""
    sp, band = vd.speedup_with_band(inc, cand, seed)
    run = _Run(task, task.baseline_path)
    run.shapes.append({"name": shape.name, "speedup": round(sp, 4), "noise_pct": round(band, 3),
                       "candidate_us": vd.median(cand), **vd.shape_spread(cand, inc)})
    return decide(task, run, shape)


def time_req(child: ChildProcess, task, ref_mod, shape, dev: dict, roles: list[str], samples: int, secret: int,
             *tag, reuse: bool = False) -> dict:
    """One interleaved timing request. reuse=True keeps the same input values across calls with
    the same tag (the spread and detection runs measure the clock, not fresh-input effects)."""
    tol = task.tolerance[task.dtypes[0]]
    nb = n_buffers(input_bytes(ref_mod, task, shape), dev.get("l2_bytes", 50 * 2**20))
    r, _ = child.request({"op": "time", "dims": shape.dims, "roles": roles,
                          "seeds": [derive_seed(secret, shape.name, *tag, i) for i in range(nb + 1)],
                          "samples": samples, "warmup": 5, "atol": tol.atol, "rtol": tol.rtol,
                          "l2_bytes": dev.get("l2_bytes"), "graph": False,
                          "order_seed": secrets.randbits(31), "keep_sources": reuse}, 600)
    if not r.get("ok"):
        raise TrustError(f"timing failed: {r.get('error')}\n{r.get('traceback', '')}")
    for role in roles:
        if r["roles"][role]["bad"]:
            raise TrustError(f"{role}: {r['roles'][role]['bad']} timed outputs wrong")
    return r["roles"]


def run_gpu(cfg: TrustOptions) -> dict:
    """The three figures on this GPU (the module's docstring says how each is measured)."""
    task = load_task(cfg.task)
    ref_mod = task.load_reference()
    shapes = {s.name: s for s in task.shapes}
    secret = secrets.randbits(63)
    opts = EvalOptions(on_gpu=True)
    tmp = Path(tempfile.mkdtemp(prefix="warpsmith-bench-"))
    child = ChildProcess(task, True, opts)
    out: dict = {"task": task.name}
    try:
        hello = child.start(300)
        assert hello.get("ok"), hello
        dev, _ = child.request({"op": "device"}, 300)
        out["device"] = {k: v for k, v in dev.items() if k != "ok"}
        staged = child.stage(task.baseline_path)
        for role in ("incumbent", "candidate"):
            r, _ = child.request({"op": "import", "role": role, "path": str(staged)}, 300)
            assert r.get("ok"), r
        inc_child = ChildProcess(task, True, opts)  # the parent-clock A/A's incumbent: a process of its own
        assert inc_child.start(300).get("ok")
        r, _ = inc_child.request({"op": "import", "role": "incumbent", "path": str(inc_child.stage(task.baseline_path))},
                                 300)
        assert r.get("ok"), r
        fresh = None
        if cfg.aa_processes != "setup":
            fresh = ChildProcess(task, True, opts)
            assert fresh.start(300).get("ok")
            r, _ = fresh.request({"op": "import", "role": "candidate", "path": str(fresh.stage(task.baseline_path))}, 300)
            assert r.get("ok"), r
        timed_children = {"setup": {"incumbent": inc_child, "candidate": child},
                          "fresh": {"incumbent": inc_child, "candidate": fresh},
                          "swapped": {"incumbent": child, "candidate": fresh}}[cfg.aa_processes]

        # 1. A/A (round-robin over every GPU shape with --aa-shape all: a per-task check)
        aa_shapes = list(task.shapes) if cfg.aa_shape == "all" else [shapes[cfg.aa_shape]]
        t0 = time.monotonic()
        aa = []

        last_batch: dict = {}
        rejected: list[str] = []  # rule names, every trial's (a rejection of the same kernel is a harness bug)
        opts_t = EvalOptions(on_gpu=True, samples=cfg.samples, run_timeout_s=task.call_timeout_for(True))

        def aa_trial(aa_shape, *tag) -> Decision:
            if cfg.aa_clock == "child":
                res = time_req(child, task, ref_mod, aa_shape, dev, ["incumbent", "candidate"], cfg.samples,
                               secret, *tag)
                return keep(task, aa_shape, res["incumbent"]["event_us"], res["candidate"]["event_us"],
                            derive_seed(secret, *tag))
            # The evaluator's own path: timing_stage.time_shape measures and judges (every rejection
            # rule), runner.timed_verdict decides.
            run = _Run(task, task.baseline_path)
            run.shapes.append({"name": aa_shape.name})
            m = timing_stage.time_shape(run, run.shapes[0], timed_children, task,
                                        ref_mod, aa_shape, dev, opts_t,
                                        lambda *p: derive_seed(secret, aa_shape.name, *tag, *p))
            for r in run.reasons:
                rejected.append(r["rule"])
                print(f"  REJECTED the same kernel: {r['rule']}: {r['message'][:300]}", flush=True)
            c, i = m["roles"]["candidate"], m["roles"]["incumbent"]
            if c["per_call_us"] and i["per_call_us"]:
                last_batch.update(n=m["n"], graph=m.get("graph"), parent_us=vd.median(c["per_call_us"]),
                                  child_us=vd.median(c["child_us"]) / max(m["n"], 1),
                                  child_spread=vd.spread_pct([x / max(m["n"], 1) for x in c["child_us"]]),
                                  inc_parent_us=vd.median(i["per_call_us"]),
                                  inc_child_us=vd.median(i["child_us"]) / max(m["n"], 1))
            return decide(task, run, aa_shape)

        for t in range(cfg.trials):
            aa_shape = aa_shapes[t % len(aa_shapes)]
            k, sp, band, e, _ = confirmed(aa_trial(aa_shape, "aa", t), lambda: aa_trial(aa_shape, "aa-confirm", t))
            aa.append({"shape": aa_shape.name, "keep": k, "speedup": sp, "band_pct": band,
                       "median_us": e.get("candidate_us"), "spread_pct": e.get("spread_pct")})
            # One line a trial: a run cut by its time box still shows how far it got.
            print(f"  A/A {t + 1}/{cfg.trials} {aa_shape.name}: {sp:.4f}x band ±{band:.2f}%"
                  f"{' FALSE KEEP' if k else ''}  ({time.monotonic() - t0:.0f} s)"
                  + (f"; {last_batch['n']} calls/batch{' graph' if last_batch['graph'] else ''}, parent "
                     f"{last_batch['parent_us']:.2f} us/call, child events {last_batch['child_us']:.2f} us/call "
                     f"(spread {last_batch['child_spread']:.1f}%); incumbent parent {last_batch['inc_parent_us']:.2f}, "
                     f"events {last_batch['inc_child_us']:.2f} us/call" if last_batch else ""), flush=True)
        inc_child.close()
        if fresh is not None:
            fresh.close()
        # The figures of the trials that were timed to the end (a rejected or crashed one has none).
        fig = [a for a in aa if a["speedup"] == a["speedup"] and a["median_us"] is not None]

        def stat(f, key, nd):
            return round(f(a[key] for a in fig), nd) if fig else None

        out["aa"] = {"shape": cfg.aa_shape if cfg.aa_shape == "all" else aa_shapes[0].name, "clock": cfg.aa_clock,
                     "processes": cfg.aa_processes,
                     "trials": len(aa), "trials_without_figures": len(aa) - len(fig),
                     "false_keeps": sum(a["keep"] for a in aa),
                     "rejections": len(rejected), "rejection_rules": sorted(set(rejected)),
                     "speedups": [round(a["speedup"], 4) for a in fig],
                     "max_abs_gain_pct": round(max(abs(a["speedup"] - 1) * 100 for a in fig), 3) if fig else None,
                     "median_band_pct": stat(statistics.median, "band_pct", 3),
                     "median_us": stat(statistics.median, "median_us", 2),
                     "median_spread_pct": stat(statistics.median, "spread_pct", 2),
                     "max_spread_pct": stat(max, "spread_pct", 2),
                     "seconds": round(time.monotonic() - t0, 1)}
        # Said now: a time-boxed run (bench/h200.sh) that is cut later still reports the A/A.
        print(f"A/A ({cfg.aa_clock} clock, {out['aa']['shape']}): {out['aa']['false_keeps']}/{len(aa)} false keeps, "
              f"{len(rejected)} rejections{' (' + ', '.join(sorted(set(rejected))) + ')' if rejected else ''}, "
              f"{len(aa) - len(fig)} trials without figures, "
              f"median band {out['aa']['median_band_pct']}%, median spread {out['aa']['median_spread_pct']}%, "
              f"largest {out['aa']['max_spread_pct']}%, {out['aa']['median_us']} us per call, "
              f"{out['aa']['seconds']} s", flush=True)

        if cfg.only_aa:
            return out
        # 2. spread of repeated medians on a >= 100 µs shape
        sp_shape = shapes[cfg.spread_shape]
        meds = []
        for rep in range(cfg.repeats):
            res = time_req(child, task, ref_mod, sp_shape, dev, ["incumbent", "candidate"], cfg.samples, secret,
                           "spread", reuse=True)
            meds.append(vd.median(res["candidate"]["event_us"]))
        out["spread"] = {"shape": sp_shape.name, "repeats": len(meds), "medians_us": [round(m, 2) for m in meds],
                         "median_us": round(vd.median(meds), 2), "spread_pct": round(vd.spread_pct(meds), 3),
                         "stdev_pct": round(statistics.pstdev(meds) / vd.median(meds) * 100, 3)}

        # 3. a real ~3% improvement: calibrate the slow variant with many samples, then detect
        det_shape = shapes[cfg.detect_shape]
        base_us = out["spread"]["median_us"] if det_shape is sp_shape else None
        bytes_row = 2 * det_shape.dims.get("cols", 1)
        candidates = [int(bytes_row * f / 2) // 1024 * 1024 for f in (0.02, 0.04, 0.06, 0.09, 0.13)]
        roles = []
        for extra in candidates:
            p = tmp / f"slow_{extra}.py"
            p.write_text(SLOW_VARIANT.format(extra=max(extra, 1024)))
            role = f"slow{extra}"
            r, _ = child.request({"op": "import", "role": role, "path": str(child.stage(p))}, 300)
            assert r.get("ok"), r
            roles.append(role)
        res = time_req(child, task, ref_mod, det_shape, dev, ["candidate"] + roles, cfg.calib_samples, secret, "det",
                       reuse=True)
        cand_med = vd.median(res["candidate"]["event_us"])
        gaps = {role: vd.median(res[role]["event_us"]) / cand_med - 1 for role in roles}
        target = cfg.gain_pct / 100
        role = min(roles, key=lambda r: abs(gaps[r] - target))
        det = []
        for t in range(cfg.detect_trials):
            res = time_req(child, task, ref_mod, det_shape, dev, [role, "candidate"], cfg.samples, secret, "det",
                           reuse=True)
            def det_again(t=t):
                r2 = time_req(child, task, ref_mod, det_shape, dev, [role, "candidate"], cfg.samples, secret,
                              "det-confirm", reuse=True)
                return keep(task, det_shape, r2[role]["event_us"], r2["candidate"]["event_us"], 20_000 + t)

            k, sp, band, _, _ = confirmed(keep(task, det_shape, res[role]["event_us"], res["candidate"]["event_us"],
                                               1000 + t), det_again)
            det.append({"keep": k, "speedup": sp, "band_pct": band})
        out["detect"] = {"shape": det_shape.name, "true_gap_pct": round(gaps[role] * 100, 2),
                         "calibration_gaps_pct": {r: round(g * 100, 2) for r, g in gaps.items()},
                         "calibration_samples": cfg.calib_samples, "trials": len(det),
                         "detected": sum(d["keep"] for d in det),
                         "median_speedup": round(statistics.median(d["speedup"] for d in det), 4),
                         "median_band_pct": round(statistics.median(d["band_pct"] for d in det), 3),
                         "baseline_us": base_us}
    finally:
        child.close()
    return out


def run_simulated(cfg: TrustOptions) -> dict:
    """The decision rule alone, on lognormal samples: A/A and a true 3% gap, 3% noise per sample."""
    rng = random.Random(1)
    task = load_task(cfg.task)
    shape = task.shapes[0]  # named only: the figures are drawn here

    def draw(mu: float, n: int) -> list[float]:
        return [mu * math.exp(rng.gauss(0, 0.03)) for _ in range(n)]

    def trial(mu_inc: float, t: int) -> bool:  # the evaluator's rule: a would-be keep is decided on a second draw
        def once(k):
            return keep(task, shape, draw(mu_inc, cfg.samples), draw(100, cfg.samples), t + k * 10_000)
        return confirmed(once(0), lambda: once(1)).keep

    aa = [trial(100, t) for t in range(cfg.trials)]
    det = [trial(100 * (1 + cfg.gain_pct / 100), t) for t in range(cfg.detect_trials)]
    return {"task": "simulated", "aa": {"trials": len(aa), "false_keeps": sum(aa)},
            "detect": {"trials": len(det), "detected": sum(det), "true_gap_pct": cfg.gain_pct}}


def print_table(r: dict) -> None:
    dev = r.get("device", {})
    print(f"timing trust — {r['task']} on {dev.get('name', 'simulated noise')}"
          + (f" (copy {dev['copy_bw_Bps'] / 1e12:.2f} TB/s, L2 {dev['l2_bytes'] / 2**20:.0f} MiB, torch {dev['torch']}, "
             f"triton {dev['triton']})" if dev else ""))
    aa = r["aa"]
    if "rejections" in aa:
        print(f"  A/A rejections          {aa['rejections']}/{aa['trials']}"
              + (f"  ({', '.join(aa['rejection_rules'])})" if aa["rejection_rules"] else "") + "   goal 0")
    print(f"  A/A false-keep rate     {aa['false_keeps']}/{aa['trials']}"
          + (f"  ({aa.get('clock', 'child')} clock, shape {aa['shape']}, median {aa['median_us']} µs, "
             f"band ±{aa['median_band_pct']}%, "
             f"largest |gain| {aa['max_abs_gain_pct']}%)" if "shape" in aa else "") + "   goal 0")
    if "median_spread_pct" in aa:
        print(f"  sample spread (IQR/med) median {aa['median_spread_pct']}%, largest {aa['max_spread_pct']}% of "
              f"{aa['trials']} A/A runs   keep bound {vd.SPREAD_MAX_PCT:g}%")
    if "spread" in r:
        s = r["spread"]
        print(f"  spread of medians       {s['spread_pct']}% (max-min)/median, stdev {s['stdev_pct']}%"
              f"  ({s['repeats']} runs, shape {s['shape']}, median {s['median_us']} µs)   goal <= 1%")
    d = r.get("detect")
    if d is None:
        return
    print(f"  real {d['true_gap_pct']}% improvement     detected {d['detected']}/{d['trials']}"
          + (f"  (shape {d['shape']}, median speedup {d['median_speedup']}, band ±{d['median_band_pct']}%)"
             if "shape" in d else ""))


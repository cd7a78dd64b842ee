"""Timing that decides, measured where the candidate can't reach: the parent's clock.

Code in the child is hostile: whatever the child reports (CUDA events, sample lists, output
checks) the candidate can rewrite, since it runs in that process. So the figures that decide
keep and revert come from here:

  - two children: the incumbent's and the candidate's. The incumbent never shares a process
    with the candidate (nothing the candidate does in its process can slow the incumbent's code);
  - each sample is one *batch* of n back-to-back calls on n fresh input sets (made from the
    parent's seeds, outside the timed window), on a GPU captured as one CUDA graph and replayed
    (so Python's launch overhead doesn't hide the kernel's time), ending in a device-wide sync; the parent times
    the request from send to reply with its own clock; per-call time = (wall - overhead) / n,
    where overhead is the smaller of the two children's empty-batch round trips (a child can
    only inflate its own);
  - while one child runs a batch, the other is frozen (SIGSTOP on its whole process tree): a
    candidate can't launch work against the incumbent's batches;
  - incumbent and candidate batches alternate in random order; the incumbent is first timed
    alone (candidate frozen, before any candidate batch) and "incumbent-slowed" compares;
  - the output of one call of a random subset of batches comes back as bytes and is compared
    here against the reference computed here ("timed-outputs-correct"); nothing in the child
    (a patched `.float()`, a compare function) is part of that check. Which batches and which
    call are named only after the batch (the child keeps every call's output until then);
  - the child's own figure (CUDA events around the batch; its host clock on CPU) is only a
    cross-check: beyond a bound from the parent's figure, "timer-disagrees".
A kernel that skips a share x of its calls (or of their rows) is caught with probability
1-(1-x)^k over k checked calls; what it skips unseen it gains little from. The inputs are made in the child
before the timed window, so a candidate that hooks their making can compute there and replay a
copy: it can gain up to the floor, not past it (closing that needs inputs written by the parent,
e.g. through CUDA IPC while the child is stopped). The re-measure of a win (timing_stage.to_remeasure
says which shapes) runs the same way in two fresh children.
"""
from __future__ import annotations

import math
import os
import random
import signal
import threading
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable

from harness.evaluate import channel
from harness.evaluate import verdict as vd
from harness.evaluate.sandbox import descendants

if TYPE_CHECKING:
    from harness.evaluate.process import ChildProcess, EvalOptions, _Run
    from harness.authoring.tasks import Shape, Task

# A batch long enough that the round trip's jitter is small beside it: at 2 ms (128 calls of the
# 10 µs softmax 4k x 4k, capped by input bytes) the H200's A/A bands were ±9-21%.
TARGET_BATCH_US = 4000.0
MAX_BATCH_BYTES = 16 * 2**30  # one fresh input set per call (no call sees another's inputs): at most this much
                              # input per batch, and at most a quarter of the GPU's free memory
MAX_CALLS = 1000
ALONE_BATCHES = 8             # incumbent batches before any candidate batch (the "alone" figure)
RESIZE_AFTER = 2              # of those, the first ones size the batch again from their GPU time (_alone)
RESIZE_MIN_RATIO = 1.5        # resized only where that asks for this many times the calls
OOM_HALVINGS = 3              # a batch that runs out of GPU memory is halved at most this often
PREP_MAX_S = 0.05             # a batch grows (RESIZE) only while refilling its inputs stays under this
CHECK_RATE = 0.25             # share of batches whose output comes back for the parent to check
DISAGREE_PCT = 10.0           # child's figure vs the parent's, beyond this (+ DISAGREE_US): rejected
DISAGREE_US = 60.0
SLOWED_MIN_PCT = 10.0


def freeze(child: "ChildProcess", stop: bool, pids: list[int] | None = None) -> list[int]:
    """SIGSTOP / SIGCONT a child and every process under it (its sandbox's bwrap included); the pids
    signalled. Thawing with the frozen pids skips a second walk of the tree: a stopped process starts
    none (one started before its parent stopped, outside the list, was never stopped)."""

    sig = signal.SIGSTOP if stop else signal.SIGCONT
    pids = [child.proc.pid, *descendants(child.proc.pid)] if pids is None else pids
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    return pids


def timed(child: "ChildProcess", req: dict, timeout: float) -> tuple[dict, float]:
    t0 = time.perf_counter()
    r, _ = child.request(req, timeout)
    return r, (time.perf_counter() - t0) * 1e6


def calls_per_batch(one_call_us: float, in_bytes: int, max_bytes: int | None = None) -> int:
    n = math.ceil(TARGET_BATCH_US / max(one_call_us, 0.5))
    cap = min(MAX_BATCH_BYTES, max_bytes) if max_bytes else MAX_BATCH_BYTES
    return int(max(1, min(n, MAX_CALLS, cap // max(in_bytes, 1))))


def measure(children: dict[str, "ChildProcess"], task: "Task", ref_mod: ModuleType, shape: "Shape",
            opts: "EvalOptions", seed_of: Callable[..., int], check_output: Callable[[list, int, int], str | None],
            in_bytes: int, samples: int | None = None, warmup: int | None = None,
            mem_free_bytes: int | None = None, sample_rows: bool = False, alone_batches: int | None = None) -> dict:
    """Parent-clock samples for both roles on one shape. check_output(tensors, n_out, seed) -> error
    or None compares one returned output with the reference of the inputs made from `seed`. With
    sample_rows, large outputs come back as rows drawn after the batch (channel.rows_to_check) and
    check_output gets the draw's seed as `rows_seed`."""
    samples = samples or opts.samples
    warmup = opts.warmup if warmup is None else warmup
    rng = random.Random(seed_of("order"))
    to = opts.run_timeout_s
    roles = ("incumbent", "candidate")
    # Batches replay a CUDA graph of their n calls where the task runs under graphs (the default;
    # the correctness stage has already required capture): the GPU's time, not Python's launches.
    graph = bool(opts.on_gpu and getattr(task, "cuda_graphs", True))
    res: dict[str, Any] = {r: {"wall_us": [], "child_us": [], "net_us": [], "per_call_us": [], "bad": 0,
                               "checked": 0, "errors": [], "observed": []} for r in roles}
    batch_no = [0]
    warmed: set[str] = set()
    parts: dict[str, float] = {}  # wall seconds by part (prep, batch, fetch, check, freeze, setup)
    lock = threading.Lock()  # both roles' preps run at once (prep_both)

    def spent(part: str, t0: float) -> None:
        with lock:
            parts[part] = parts.get(part, 0.0) + time.perf_counter() - t0

    def number() -> int:
        batch_no[0] += 1
        return batch_no[0] - 1

    def prep(role: str, n: int, k: int | None = None) -> dict | None:
        """The batch's n fresh input sets in the role's child (and, the first time, its warm-up and
        capture): {"k", "seeds", "refill_s"}, None if it crashed; _OutOfMemory where the prep ran out
        of GPU memory. k: the batch's number (its seeds' draw), given where preps run at once."""
        k = number() if k is None else k
        with lock:
            first = role not in warmed
        # The calls' seeds drawn from one secret-derived seed a batch (a hash per call was ~0.5 ms a batch
        # of 256): all of them go to the child in the prep request anyway, and no batch's draw tells
        # anything about another's.
        draw = random.Random(seed_of(role, k))
        seeds = [draw.getrandbits(56) for _ in range(max(n, 1))]
        t0 = time.perf_counter()
        r, _ = children[role].request({"op": "prep", "role": role, "dims": shape.dims, "seeds": seeds,
                                       "warmup": warmup if first else 0, "graph": graph}, to)  # (compiles, autotunes)
        spent("prep", t0)
        if not r.get("ok"):
            if r.get("detail") == "oom" and n > 1:
                raise _OutOfMemory(role, str(r.get("error")))
            res[role]["errors"].append(r.get("error"))
            return None
        with lock:
            warmed.add(role)
        refill = (r.get("parts") or {}).get("refill")
        return {"k": k, "seeds": seeds, "refill_s": float(refill) if isinstance(refill, (int, float)) else None}

    def run(role: str, n: int, check: bool, prepped: dict) -> dict | None:
        """Time one prepared batch (the other child frozen), then fetch and check one call of it."""
        k, seeds = prepped["k"], prepped["seeds"]
        ch, other = children[role], children[roles[1 - roles.index(role)]]
        t0 = time.perf_counter()
        frozen = freeze(other, True) if other is not ch else []
        try:
            # On a GPU, an empty batch first, untimed: it syncs and records events in this child's GPU
            # context, so the switch from the other child's context is paid here, not in the timed batch. Without it,
            # on the H200, the candidate read faster than the same kernel as incumbent in 22-30 of 24-34
            # A/A trials (median 1.3%, a false keep in 34) in whichever process it ran, while the GPU's
            # own events showed no lean (bench/timing_trust.py --aa-processes): a cost of the parent's
            # clock that fell on one role more often, most likely the switch to the context that was
            # not left current by the last prep.
            t1 = time.perf_counter()
            if opts.on_gpu:  # (the interpreter has no GPU context to switch: no round trip for it)
                ch.request({"op": "batch", "n": 0, "role": role}, to)
                spent("touch", t1)
            touch = time.perf_counter() - t1
            t1 = time.perf_counter()
            r, wall = timed(ch, {"op": "batch", "n": n}, to)
            spent("batch", t1)
        finally:
            if other is not ch:
                freeze(other, False, frozen)
        parts["freeze"] = parts.get("freeze", 0.0) + time.perf_counter() - t0 - wall / 1e6 - touch
        if not r.get("ok"):
            res[role]["errors"].append(r.get("error"))
            return None
        child_fig = r.get("event_us") if r.get("event_us") is not None else r.get("child_us")
        figs = {"wall": wall, "child": float(child_fig or 0.0), "out_bytes": int(r.get("out_bytes") or 0),
                "refill_s": prepped["refill_s"]}
        if not (check and n):
            return figs  # nothing fetched: a round trip saved (what the guards saw comes with the checked ones)
        # The checked call is named now, after the batch: the child kept every call's output, and
        # nothing in it could know which one would be compared while the batch ran.
        j = rng.randrange(n)
        t0 = time.perf_counter()
        rows_seed = seed_of(role, k, "rows") if sample_rows else None
        req: dict[str, Any] = {"op": "fetch", "check": j}
        if rows_seed is not None:
            req.update(rows_seed=rows_seed, rows_min_bytes=channel.SAMPLE_MIN)
        f, tensors = ch.request(req, to)
        spent("fetch", t0)
        res[role]["observed"] += f.get("observed", [])
        res[role]["checked"] += 1
        t0 = time.perf_counter()
        extra = {"rows_seed": rows_seed, "min_bytes": channel.SAMPLE_MIN} if rows_seed is not None else {}
        err = check_output(tensors, f.get("n_out", 1), seeds[j], **extra) if len(tensors) == f.get("n_out", 1) \
            else "the output is not a plain tensor"
        spent("check", t0)
        if err:
            res[role]["bad"] += 1
            res[role]["errors"].append(err)
        return figs

    def run_batch(role: str, n: int, check: bool) -> dict | None:
        prepped = prep(role, n)
        return run(role, n, check, prepped) if prepped else None

    def prep_both(n: int) -> dict[str, dict | None]:
        """Both roles' preps at once, each in its own child (a refill is host-bound: on the H200 a DeepSeek
        V4 set took 3.3 ms of launches for 0.4 ms of GPU work), so a round waits for the slower, not the
        sum. Neither is timing then; each batch runs after both preps ended, the other child frozen."""
        out: dict[str, Any] = {}
        ks = {role: number() for role in roles}  # (numbered here, in order: the seeds don't race)

        def one(role: str) -> None:
            try:
                out[role] = prep(role, n, ks[role])
            except BaseException as e:  # noqa: BLE001 - raised again in this thread below
                out[role] = e

        threads = [threading.Thread(target=one, args=(role,), daemon=True) for role in roles]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for role in roles:  # (an out-of-memory first: it restarts the shape; a crash is the role's error)
            if isinstance(out[role], _OutOfMemory):
                raise out[role]
        for role in roles:
            if isinstance(out[role], BaseException):
                raise out[role]
        return out

    # Round-trip overhead: empty batches in each child; the smaller median (inflating it helps no one).
    over = {}
    for role in roles:
        walls = []
        for _ in range(6):
            r, w = timed(children[role], {"op": "batch", "n": 0, "role": role}, to)
            walls.append(w)
        over[role] = vd.median(walls[2:])
    overhead = min(over.values())
    # Calls per batch from the incumbent's single calls.
    singles = [run_batch("incumbent", 1, False) for _ in range(3)]
    # A call's time, to size the batches, from the incumbent's own GPU events where there are any:
    # that process never held the candidate, and the parent's clock on one call is mostly round
    # trip (on the H200 it sized 4k x 4k batches at 13-38 calls where ~130 make 4 ms).
    got = [s for s in singles if s]
    if not got:
        one = 100.0
    elif opts.on_gpu and all(s["child"] > 0 for s in got):
        one = vd.median([s["child"] for s in got])
    else:
        one = vd.median([max(s["wall"] - overhead, 0.1) for s in got])
    if mem_free_bytes is None and graph:  # asked of the incumbent's child: the candidate's could say anything
        # (the candidate's child is asked first only so that it, too, hands back its allocator's cache)
        children["candidate"].request({"op": "mem"}, to)
        r, _ = children["incumbent"].request({"op": "mem"}, to)
        mem_free_bytes = r.get("free") if r.get("ok") else None
    # Each call's output is kept to the end of its batch (any may be checked): its bytes count with the
    # inputs', as the incumbent's child reported them for one call (that child never held the candidate).
    out_bytes = max([s["out_bytes"] for s in got] or [in_bytes])
    cap = mem_free_bytes // 4 if mem_free_bytes else None
    n = calls_per_batch(one, in_bytes + out_bytes, cap)
    notes: list[str] = []
    alone, alone_child = [], []
    ceiling = MAX_CALLS  # lowered to what fitted when a batch ran out of memory
    for attempt in range(OOM_HALVINGS + 1):
        try:
            n, alone, alone_child = _alone(run_batch, n, overhead, alone_batches or ALONE_BATCHES, graph,
                                           lambda one_us, set_s: min(calls_per_batch(one_us, in_bytes + out_bytes, cap),
                                                                     ceiling, prep_cap(n, set_s)), notes)
            _rounds(prep_both, run, res, rng, roles, n, samples, overhead)
            break
        except _OutOfMemory as e:
            # The batch's n input sets (the harness's choice) did not fit beside what the two children and
            # this process hold: the harness's own doing, so it halves the batch and starts the shape over
            # rather than report the candidate's crash. What still fails at one call is the kernel's.
            for d in res.values():
                for k in ("wall_us", "child_us", "net_us", "per_call_us"):
                    d[k].clear()
            if attempt == OOM_HALVINGS:
                res[e.role]["errors"].append(f"out of GPU memory even at {n} call(s) a batch: {e.error}")
                break
            notes.append(f"the {e.role}'s batch of {n} calls ran out of GPU memory; halved to {max(1, n // 2)}")
            n = ceiling = max(1, n // 2)
    return {"roles": res, "n": n, "graph": graph, "overhead_us": overhead, "overhead_by_role_us": over,
            "parts_s": parts, "notes": notes,
            "incumbent_alone_us": vd.median(alone) if alone else None,
            "incumbent_alone_child_us": vd.median(alone_child) if alone_child else None}


def prep_cap(n: int, set_s: float | None) -> int:
    """The most calls a batch may grow to by what refilling one input set costs (a tiny kernel's batch
    grown to MAX_CALLS made its prep 100x its batch: DeepSeek V4's compress spent 24 s of a 40 s
    evaluation refilling inputs). Never below today's n."""
    if not set_s or set_s <= 0:
        return MAX_CALLS
    return max(n, int(PREP_MAX_S / set_s))


class _OutOfMemory(Exception):
    def __init__(self, role: str, error: str):
        self.role, self.error = role, error
        super().__init__(f"{role}: {error}")


def _alone(run_batch: Callable, n: int, overhead: float, batches: int, graph: bool,
           size_for: Callable[[float, float | None], int], notes: list[str]) -> tuple[int, list[float], list[float]]:
    """The incumbent's batches before any candidate batch: its 'alone' figure, per call. The first
    RESIZE_AFTER batches also size the batch again where they were graph replays: a single eager
    call's events hold its launch (a 4 us kernel read ~45 us, so its batches held a tenth of the target
    time and their spread was 24-38%); a replay's events are the calls' GPU time alone."""
    alone, alone_child = [], []
    first, refills = [], []
    for i in range(batches + RESIZE_AFTER):
        s = run_batch("incumbent", n, False)
        if i < RESIZE_AFTER:
            if s and s["child"] > 0:
                first.append(s["child"] / n)
            if s and s.get("refill_s"):
                refills.append(s["refill_s"] / n)
            if i == RESIZE_AFTER - 1 and graph and first:
                again = size_for(vd.median(first), vd.median(refills) if refills else None)
                if again > n * RESIZE_MIN_RATIO:
                    notes.append(f"batch resized from {n} to {again} calls by the graph replays' GPU time")
                    n = again
            continue
        if s:
            alone.append(max(s["wall"] - overhead, 0.0) / n)
            alone_child.append(s["child"] / n)
    return n, alone, alone_child


def _rounds(prep_both: Callable, run: Callable, res: dict, rng: random.Random, roles: tuple, n: int, samples: int,
            overhead: float) -> None:
    """Incumbent and candidate batches in a random order each round, both prepared first; stops at a
    crash (the verdict rejects it either way: the rounds left would only repeat it)."""
    for i in range(samples):
        order = list(roles)
        rng.shuffle(order)
        prepped = prep_both(n)
        if any(prepped[r] is None for r in roles):
            return
        for role in order:
            check = i in (0, samples - 1) or rng.random() < CHECK_RATE
            s = run(role, n, check, prepped[role])
            if s is None:
                return
            net = max(s["wall"] - overhead, 0.0)
            d = res[role]
            d["wall_us"].append(s["wall"])
            d["net_us"].append(net)
            d["child_us"].append(s["child"])
            d["per_call_us"].append(net / n)


def roofline_and_floor(run: "_Run", entry: dict, tag: str, c_med: float, floor: tuple[float | None, str],
                       dev: dict, bytes_moved: float | None) -> None:
    """The candidate's % of measured copy bandwidth, and `impossible-time` below the physical floor
    (shared by this judge and the in-child one that timing_trust still uses)."""
    if bytes_moved:
        # Also where the GPU's copy bandwidth is unknown: the tuner then takes the hardware pack's.
        entry["bytes_moved"] = int(bytes_moved)
    if bytes_moved and dev.get("copy_bw_Bps") and c_med > 0:
        entry["roofline_pct"] = round(bytes_moved / (c_med * 1e-6) / dev["copy_bw_Bps"] * 100, 1)
    fl, why = floor
    if fl is not None and c_med < fl:
        run.reject("timing", "impossible-time",
                   f"{tag}candidate median {c_med:.2f} µs is below the physical floor {fl:.2f} µs ({why})")


def judge(run: "_Run", entry: dict, m: dict, floor: tuple[float | None, str], dev: dict,
          bytes_moved: float | None) -> None:
    """Rejections and the shape's figures from parent-clock samples (CPU-testable: plain numbers)."""
    tag = f"[{entry['name']}] "
    inc, cand = m["roles"]["incumbent"], m["roles"]["candidate"]
    for who, d in (("candidate", cand), ("incumbent", inc)):
        for o in d.get("observed", []):
            run.reject("timing", o["rule"], tag + o["message"])
        if d["bad"]:
            run.reject("timing", "timed-outputs-correct",
                       f"{tag}{d['bad']} of {d['checked']} checked timed {who} outputs were wrong (compared in the "
                       f"harness's process): {str(d['errors'][-1])[:200]}")
        elif d["errors"] or not d["per_call_us"]:
            run.reject("timing", "crashed", f"{tag}{who} failed while being timed: {str((d['errors'] or ['no samples'])[-1])[:300]}")
            return
    host_bound = []
    for who, d in (("candidate", cand), ("incumbent", inc)):
        net, child = vd.median(d["net_us"]), vd.median(d["child_us"])
        # One-sided: a child can't have spent more GPU time than the harness's clock saw pass
        # (that figure is a lie). A child figure well below the parent's is the host's launch
        # overhead, seen on the H200 for ~30 us kernels with ~50 us of Python around each call:
        # the parent's per-call figure then includes it, for both roles alike (a note, not a
        # rejection; the decision is on the parent's figures either way).
        if child > net * (1 + DISAGREE_PCT / 100) + DISAGREE_US:
            run.reject("timing", "timer-disagrees",
                       f"{tag}{who}: the child reported {child:.1f} µs per batch of {m['n']} calls, more than the "
                       f"harness's clock saw pass ({net:.1f} µs net of {m['overhead_us']:.1f} µs round trip)")
        elif net > child * (1 + DISAGREE_PCT / 100) + DISAGREE_US:
            host_bound.append(f"{who} {net / m['n']:.1f} µs per call by the harness's clock, {child / m['n']:.1f} "
                              "µs on the GPU")
    # Graphed batches have no launches between calls: what the parent's clock sees beyond the GPU's time
    # is a fixed cost a batch (the replay's launch, the host's wake-up after milliseconds of waiting;
    # 0.2-0.9 ms on the H200, 10-25% of a batch). Its median over the incumbent's batches (a child no
    # candidate code ran in, timed in the same rounds) is taken off both roles' batches: the GPU's time
    # per call by the parent's clock, shown beside the plain figure. The first try took it from the
    # incumbent's alone batches, which ran slower than the rounds (H200: 103% of copy bandwidth, so no).
    # The speedup, % of roofline and the floor stay on the plain figures that bench/timing_trust.py's A/A
    # runs validated; the fixed cost only compresses a speedup toward 1.
    fixed = [net - ch for net, ch in zip(inc["net_us"], inc["child_us"]) if ch > 0]
    if m.get("graph") and fixed and len(fixed) == len(inc["net_us"]):
        cost = max(vd.median(fixed), 0.0)
        for d, key in ((cand, "candidate_graph_us"), (inc, "incumbent_graph_us")):
            entry[key] = round(vd.median([max(x - cost, 0.0) / m["n"] for x in d["net_us"]]), 3)
        entry["batch_cost_us"] = round(cost, 1)
    elif host_bound:
        entry["host_bound"] = ("the calls are host-bound here (launch overhead between calls): "
                               + "; ".join(host_bound) + ". The speedup is per call as a caller sees it; a "
                               "GPU-side win smaller than the host's share is invisible")
    c_med, i_med = vd.median(cand["per_call_us"]), vd.median(inc["per_call_us"])
    k = min(len(inc["per_call_us"]), len(cand["per_call_us"]))
    sp, band = vd.speedup_with_band(inc["per_call_us"][:k], cand["per_call_us"][:k])
    entry.update(candidate_us=round(c_med, 3), incumbent_us=round(i_med, 3), speedup=round(sp, 4),
                 noise_pct=round(band, 3), calls_per_batch=m["n"], clock="parent",
                 # keep_policy's stable-timing condition reads these: the spread of the deciding samples
                 # (per-call figures of whole batches, the parent's clock), not the child's events.
                 **vd.shape_spread(cand["per_call_us"], inc["per_call_us"]))
    roofline_and_floor(run, entry, tag, c_med, floor, dev, bytes_moved)
    alone = m.get("incumbent_alone_us")
    # Judged on the incumbent child's own figures where it has CUDA events: that process never runs
    # candidate code, and its GPU time is free of the host jitter that moves the parent's figures
    # by tens of percent when the calls are host-bound (seen on the H200: +57% for an honest pair).
    alone_child, i_child = m.get("incumbent_alone_child_us"), vd.median(inc["child_us"]) / max(m["n"], 1)
    if alone_child and i_child:
        slowed = (i_child / alone_child - 1) * 100
        i_med_shown, alone_shown = i_child, alone_child
    elif alone:
        slowed = (i_med / alone - 1) * 100
        i_med_shown, alone_shown = i_med, alone
    else:
        slowed = None
    if slowed is not None:
        if slowed > max(SLOWED_MIN_PCT, 3 * band):
            run.reject("timing", "incumbent-slowed",
                       f"{tag}the incumbent took {i_med_shown:.1f} µs per call next to the candidate but "
                       f"{alone_shown:.1f} µs alone (+{slowed:.1f}%)")
    entry["incumbent_alone_us"] = round(alone, 3) if alone else None

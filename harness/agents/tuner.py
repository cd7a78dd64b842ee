"""The offline default agent: a joint search over declared spaces and structurally different variants.

What it searches (harness.agents.tunespace): each variant the task lists in task.toml
(`variants = ["kernel.py", "variants/rows.py", ...]`, else the incumbent alone), over the values its
`# warpsmith: tune NAME in [...]` comments declare and, where nothing is declared, a ladder around
each literal knob (launch num_warps / num_stages / blocks, UPPER_CASE module ints). Configurations
that fail a `# warpsmith: require` line or the hardware's limits are never proposed.

How: each variant's own defaults first (the baseline's are timed by the first evaluation, as its
incumbent), then, per shape bucket of the task (the one furthest from its roofline first, a try in
a row that gained nothing there counting against it), a move from the bucket's best chosen by what
every try taught (harness.agents.tunemodel): the values the bucket can't tell apart, a model of
what each value does, joint moves of knobs that each gained, a value a `require` line ties to
others tried with the fewest others moved to fit; the knobs the bucket doesn't feel are set as the
other buckets want them. The variant that leads most buckets is also climbed in the others. Every
try is recorded in a per-bucket Optuna study (harness.agents.tunesearch; a configuration that lost
badly on the bucket's smallest shape as pruned); TPE and a one-knob climb take over where the model
has no move, and were the whole search before issue 36 (`TunerAgent(strategy="walk")`). A bucket
whose best is within 5% of the roofline (copy bandwidth) on every shape of 10 us and more is done:
no more tries for it; when every bucket is, the tuner stops and says so. Winners per bucket come
out through the loop's per-bucket keeps (`--keep-buckets auto`) and `sessions export`.

It also reads what it can from the person's ideas and veto reasons (harness.agents.tuneideas), and
says in its reasoning what it took and what it can't use. Nothing is ever proposed twice: tries are
rebuilt from the journal, and the studies live in `<session>/tuner/` so a resume continues them.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from harness import sourcefile
from harness.agents import tuneideas, tunemodel, tunesearch
from harness.agents.base import AgentEvent, Exhausted, Proposal, ProposalContext, ReasoningChunk, code_key
from harness.agents.tuner_knobs import (PY, WARPS, Knob, apply, config_of, find_knobs,  # noqa: F401 (re-exported)
                                        kind_of, neighbours)
from harness.agents.tunespace import Space, SpaceError, hardware_limits, read_space
from harness.profiling.roofline import NEAR_PCT, bucket_roof

EXPLORE_EVERY = 3  # once a bucket has TPE_AFTER timed points, every 3rd pick is TPE's even if a climb is open
TPE_AFTER = 4
INERT = 0.02  # a knob whose one-step change moved a bucket's time by less than this is skipped there
ASKS = 12  # TPE suggestions tried before climbing from the bucket's best instead
STALL_PCT = 5.0  # a bucket's turn: its % of roofline, plus this for each aimed try in a row that gained nothing
# How the next configuration is chosen once each variant's defaults are timed:
#   model: per bucket, joint moves from its best ranked by what every try taught (harness.agents.tunemodel);
#   walk:  one step on one knob from the bucket's best, TPE every third pick (the search before issue 36,
#          kept to compare against: tests/agents/test_tuner_landscape.py).
STRATEGIES = ("model", "walk")


# Each variant's feasible configurations, by (variant, source, limits): checking split.py's 13824
# combinations against its `require` lines takes a few hundred ms, and every proposal asks.
_GRIDS: dict[tuple, tuple[list[dict], list[tuple], set[tuple]]] = {}
_SPACES: dict[tuple, Space] = {}


@dataclass
class Try:
    iteration: int
    variant: str
    config: dict
    outcome: str
    shapes: list[dict] = field(default_factory=list)
    aimed: str | None = None  # the bucket it was proposed for

    @property
    def key(self) -> tuple:
        return key_of(self.variant, self.config)

    @property
    def ok(self) -> bool:
        return self.outcome in ("kept", "reverted", "accepted")


def key_of(variant: str, config: dict) -> tuple:
    return (variant, tuple(sorted(config.items())))


@dataclass
class BucketView:
    name: str
    contains: object  # dims -> bool
    best: Try | None = None
    best_us: float | None = None
    pct: float | None = None  # geomean % of roofline of the best over the shapes that count
    min_pct: float | None = None
    counted: int = 0  # shapes with a roofline time >= MIN_ROOFLINE_US (harness.profiling.roofline)

    absent: bool = False  # measured shapes exist, none of them in this bucket (e.g. the interpreter's)

    @property
    def done(self) -> bool:
        return self.counted > 0 and self.min_pct is not None and self.min_pct >= NEAR_PCT


def _label(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def _short(variant: str) -> str:
    return Path(variant).name if variant != "incumbent" else "incumbent"


class TunerAgent:
    name = "tuner"
    model = ""
    reads_prompt = False  # it edits constants; a measured profile in the prompt would go unread

    def __init__(self, session_dir: Path | None = None, strategy: str = "model"):
        if strategy not in STRATEGIES:
            raise ValueError(f"tuner strategy {strategy!r}: one of {', '.join(STRATEGIES)}")
        self.session_dir = Path(session_dir) if session_dir else None
        self.strategy = strategy
        self._studies = None
        self._spaces_key = None
        self._lock = threading.RLock()

    # -- what it searches -------------------------------------------------------------------
    def spaces(self, ctx: ProposalContext) -> list[Space]:
        task = ctx.task
        listed = (task.raw or {}).get("variants") or []
        if not listed:
            return [read_space(ctx.incumbent_source, "incumbent")]
        out = []
        for rel in listed:
            path = task.root / str(rel)
            if not path.is_file():
                raise SpaceError(f"{task.toml_path}: variants: {rel} not found in {task.root}")
            try:  # the text the child would compile (bytes as UTF-8, no cookie, no line-ending translation)
                source = sourcefile.read_text(path)
            except sourcefile.SourceEncodingError as e:
                raise SpaceError(f"{task.toml_path}: variants: {e}") from None
            k = (str(rel), code_key(source))
            if k not in _SPACES:  # (read with tree-sitter: ~10 ms a variant, on every proposal)
                _SPACES[k] = read_space(source, str(rel))
            out.append(_SPACES[k])
        return out

    def _buckets(self, task) -> list[BucketView]:
        if task.buckets:
            return [BucketView(b.name, b.contains) for b in task.buckets]
        return [BucketView("all", lambda dims: True)]

    # -- reading results ----------------------------------------------------------------------
    @staticmethod
    def _in(bucket: BucketView, t: Try) -> list[dict]:
        return [s for s in t.shapes if bucket.contains(s.get("dims") or {})]

    def _bucket_value(self, tries: list[Try], views: list[BucketView]):
        def value(t: Try, bucket_name: str):
            b = next(b for b in views if b.name == bucket_name)
            mine = self._in(b, t)
            if not t.ok:
                return "FAIL", None, None, t.outcome
            if not mine:
                return "FAIL", None, None, "no shape of this bucket on this machine"
            if any(s.get("candidate_us") is None for s in mine):
                return "FAIL", None, None, "not timed on this machine (Triton interpreter)"
            smallest = min(mine, key=_size)
            before = [s2["candidate_us"] for u in tries if u.ok and u.iteration < t.iteration
                      for s2 in self._in(b, u) if s2.get("name") == smallest.get("name") and s2.get("candidate_us")]
            inter = {0: float(smallest["candidate_us"])}
            if before and smallest["candidate_us"] > tunesearch.PRUNE_RATIO * min(before):
                ratio = smallest["candidate_us"] / min(before)
                return "PRUNED", None, inter, f"{ratio:.2f}x the best time on {smallest.get('name')}"
            for i, s in enumerate(sorted(mine, key=_size)):
                inter[i] = float(s["candidate_us"])
            return "COMPLETE", tunesearch.geomean([s["candidate_us"] for s in mine]), inter, "timed"
        return value

    def _status(self, tries: list[Try], specs: dict, views: list[BucketView]) -> None:
        # TB/s, where a verdict lacks roofline_pct: measured, else the datasheet's mem_tb_s (specs_of's names;
        # an older pack's hbm_tb_s)
        bw = specs.get("measured_copy_tb_s") or specs.get("mem_tb_s") or specs.get("hbm_tb_s")
        shaped = [t for t in tries if t.shapes]
        for b in views:
            b.absent = bool(shaped) and not any(self._in(b, t) for t in shaped)
            for t in tries:
                mine = self._in(b, t)
                if not t.ok or not mine or any(s.get("candidate_us") is None or not s.get("correct", True)
                                               for s in mine):
                    continue
                us = tunesearch.geomean([s["candidate_us"] for s in mine])
                if b.best_us is None or us < b.best_us:
                    b.best, b.best_us = t, us
            if b.best is None:
                continue
            roof = bucket_roof(self._in(b, b.best), bw)
            b.pct = tunesearch.geomean(list(roof.pcts.values()))
            b.counted = len(roof.counted)
            b.min_pct = roof.pct

    @staticmethod
    def _nothing_to_tune(ctx: ProposalContext) -> str:
        task, src = ctx.task, getattr(ctx.task, "source", None)
        try:
            baseline = src is not None and code_key(ctx.incumbent_source) == code_key(task.baseline_path.read_text())
        except OSError:
            baseline = False
        if baseline:  # a task made from a PyTorch function (`tasks new`): its incumbent is that function
            return (f"tuner: nothing to tune: the incumbent is {src.function} run by PyTorch ({src.incumbent}), not "
                    f"a {task.dsl} kernel; the tuner searches the knobs of kernels it is given. Let an LLM agent "
                    "write the first one (--agent anthropic:MODEL, openai:MODEL, openai-compat:URL), or write it "
                    "yourself and list it in task.toml `variants` for the tuner to search")
        return ("tuner: nothing to tune: no `# warpsmith: tune` line and no tunable literal "
                "(launch num_warps/num_stages, UPPER_CASE int constants) in the incumbent")

    # -- the proposal ---------------------------------------------------------------------------
    def propose(self, ctx: ProposalContext) -> Iterator[AgentEvent]:
        try:
            spaces = self.spaces(ctx)
        except SpaceError as e:
            yield Exhausted(f"tuner: {e}")
            return
        spaces = [s for s in spaces if s.params] or spaces
        if not any(s.params for s in spaces):
            yield Exhausted(self._nothing_to_tune(ctx))
            return
        limits, specs, hw = hardware_limits(ctx.packs)
        views = self._buckets(ctx.task)  # local: proposer threads (--proposals N) share this agent
        tries = [Try(a.iteration, a.meta["variant"], dict(a.meta.get("config") or {}), a.outcome, list(a.shapes),
                     a.meta.get("bucket")) for a in ctx.history if a.meta.get("variant")]
        tried = {t.key for t in tries}

        inc_key = code_key(ctx.incumbent_source)
        grids = {s.variant: self._grid(s, limits)[0] for s in spaces}
        by_variant = {s.variant: s for s in spaces}
        for s in spaces:  # the incumbent itself is measured on every try: never propose it
            if code_key(s.render(s.default())) == inc_key:
                tried.add(key_of(s.variant, s.default()))
        baseline = self._baseline_try(ctx, spaces) if self.strategy == "model" else None
        if baseline is not None:  # timed as the first try's incumbent: never proposed again either
            tried.add(baseline.key)

        def neighbourhood(variant: str, config: dict) -> set[tuple]:
            out = {key_of(variant, config)}
            space = by_variant.get(variant)
            for p in space.params if space else []:
                if p.name in config and config[p.name] in p.values:
                    i = p.values.index(config[p.name])
                    for j in (i - 1, i + 1):
                        if 0 <= j < len(p.values):
                            out.add(key_of(variant, {**config, p.name: p.values[j]}))
            return out

        vetoes = [(a.meta, a.veto_reason) for a in ctx.history if a.veto_reason]
        names = {p.name for s in spaces for p in s.params}
        reading = tuneideas.read(list(ctx.ideas), vetoes, names, neighbourhood)

        # -- what is left to try --------------------------------------------------------------
        pin_notes = []
        pool: dict[str, list[dict]] = {}
        pool_keys: dict[str, set[tuple]] = {}  # the same, as keys (membership over 15k configurations, per proposal)
        pinned_spaces = [s for s in spaces if any(n in {p.name for p in s.params} for n in reading.pins)]
        for s in spaces:
            if reading.pins and pinned_spaces and s not in pinned_spaces:
                continue
            grid, grid_keys, _ = self._grid(s, limits)
            cands = None  # every configuration of the grid, unless a pin narrows it
            for name, value in reading.pins.items():
                p = next((p for p in s.params if p.name == name), None)
                if p is None:
                    continue
                if value not in p.values:
                    pin_notes.append(f"{name}={value} is not among {_short(s.variant)}'s values {p.values}")
                    continue
                cands = [(c, k) for c, k in (cands if cands is not None else zip(grid, grid_keys))
                         if c.get(name) == value]
            keys = set(grid_keys) if cands is None else {k for _, k in cands}
            pool_keys[s.variant] = keys - tried - reading.excluded
            pool[s.variant] = [c for c, k in (cands if cands is not None else zip(grid, grid_keys))
                               if k in pool_keys[s.variant]]
        left = sum(len(v) for v in pool.values())

        self._status(([baseline] if baseline is not None else []) + tries, specs, views)
        studies = self._study(ctx, views)
        if studies is not None:  # every try is in every bucket's study, the first ones included
            with self._lock:
                studies.sync(spaces, tries, self._bucket_value(tries, views))
        # -- say where it stands --------------------------------------------------------------
        text = []
        desc = "; ".join(f"{_short(s.variant)} ({len(grids[s.variant])} configuration"
                         f"{'' if len(grids[s.variant]) == 1 else 's'}"
                         f"{', declared' if any(p.declared for p in s.params) else ', literals found'})"
                         for s in spaces)
        text.append(f"Searching {len(spaces)} variant{'s' if len(spaces) > 1 else ''}: {desc}"
                    f"{f', within the limits of the {hw} pack' if hw else ''}. ")
        if not tunesearch.available():
            text.append("Optuna is not installed here: the search climbs from each bucket's best and "
                        "walks the grid in order. ")
        for note in [n for s in spaces for n in s.notes]:
            text.append(note + ". ")
        if tries:
            last = tries[-1]
            text.append(f"Last try: {_short(last.variant)} {_label(last.config)} ended {last.outcome}. ")
        for b in views:
            if b.absent:
                text.append(f"Bucket {b.name}: no shape of it is run on this machine. ")
                continue
            if b.best is None:
                text.append(f"Bucket {b.name}: nothing timed yet. ")
                continue
            roof = (f", {b.pct:.0f}% of roofline" if b.pct is not None else "")
            pruned = studies.counts(b.name).get("PRUNED", 0) if studies is not None else 0
            pruned_text = (f"; {pruned} configuration{'' if pruned == 1 else 's'} pruned here (over "
                           f"{tunesearch.PRUNE_RATIO}x the best time on its smallest shape)" if pruned else "")
            text.append(f"Bucket {b.name}: best {b.best_us:.1f} us{roof} ({_short(b.best.variant)} "
                        f"{_label(b.best.config)}){pruned_text}"
                        + (f" — within {100 - NEAR_PCT:g}% of roofline, done: no more tries for it. "
                           if b.done else ". "))
        if reading.took:
            text.append("From you, taken: " + "; ".join(reading.took) + ". ")
        if pin_notes:
            text.append("Not taken: " + "; ".join(pin_notes) + ". ")
        if reading.unused:
            text.append("Can't use: " + "; ".join(reading.unused) + " — the tuner reads only NAME=value for a "
                        "tuned name, more/fewer warps, stages or blocks, and vetoes of its own candidates; "
                        "press m to switch to an LLM agent that reads free text. ")
        yield ReasoningChunk("".join(text))

        measured = [t for t in tries if t.shapes]
        if len(measured) > len(spaces) and not any(x.get("candidate_us") is not None
                                                    for t in measured for x in t.shapes):
            # Without a GPU nothing is timed: each variant checked on the interpreter's shapes and a
            # configuration or two of the search (Optuna's draws) is all a run can learn there.
            yield Exhausted(f"tuner: nothing is timed on this machine; {len(tries)} configurations across "
                            f"{len({t.variant for t in tries})} variants were checked on the interpreter's shapes, "
                            "the search needs a GPU to go further")
            return
        live = [b for b in views if not b.done and not b.absent]
        if not live:  # nothing left to aim a search at: stop, as when every configuration was tried
            if any(b.done for b in views):
                yield Exhausted(f"tuner: every bucket is within {100 - NEAR_PCT:g}% of its roofline ("
                                + "; ".join(f"{b.name} {b.min_pct:.0f}%" for b in views if b.done) + ")")
            else:
                yield Exhausted("tuner: every bucket is done or absent: no bucket left to search ("
                                + "; ".join(f"{b.name}: no shape of it is run on this machine" for b in views) + ")")
            return
        if left == 0:
            yield ReasoningChunk("\nEvery configuration left in the space has been tried.\n")
            yield Exhausted("tuner: every configuration of every variant in the declared space has been tried")
            return

        # -- choose ---------------------------------------------------------------------------
        choice, why, bucket = None, "", None
        # Each variant's own defaults first (a kernel engineer's starting points), unless the person
        # asked for a direction that some untried configuration takes: that comes first.
        asked = bool(reading.prefer) and bool(self._preferred([(v, c) for v, cs in pool.items() for c in cs], reading,
                                                              BucketView("", lambda d: True), spaces))
        for s in ([] if asked else spaces):
            d = s.default()
            for name, value in reading.pins.items():
                if name in d:
                    d[name] = value
            if key_of(s.variant, d) in pool_keys.get(s.variant, ()):
                choice, why = (s.variant, d), "its own defaults, a first look at this variant"
                break
        if choice is None and self.strategy == "model" and not reading.prefer:
            picked = self._pick_model(spaces, pool_keys, views, live, tries, baseline, limits)
            if picked is not None:
                choice, why, bucket = picked
        if choice is None:
            timed = [b for b in live if b.pct is not None]
            if timed:
                bucket = min(timed, key=lambda b: b.pct)
                bucket_why = f"the bucket furthest from its roofline ({bucket.pct:.0f}%)"
            else:
                bucket = live[ctx.iteration % len(live)]
                bucket_why = "in turn (nothing timed: no guidance from speed on this machine)"
            choice, why = self._pick(ctx, spaces, pool, bucket, reading, views, tries)
            why = f"for bucket {bucket.name}, {bucket_why}: {why}"
        variant, config = choice
        space = by_variant[variant]
        yield ReasoningChunk(f"\nNext: {_short(variant)} {_label(config)} — {why}. {left} untried "
                             f"configuration{'' if left == 1 else 's'} left.\n")
        meta = {"variant": variant, "config": config}
        if bucket is not None:
            meta["bucket"] = bucket.name
        changed = {k: v for k, v in config.items() if space.default().get(k) != v}  # what the diff shows
        yield Proposal(space.render(config), f"{_short(variant)} {_label(changed) if changed else 'defaults'}"
                       + (f" (for {bucket.name})" if bucket is not None else ""), meta=meta)

    def _pick(self, ctx, spaces, pool, bucket: BucketView, reading, views, tries) -> tuple[tuple[str, dict], str]:
        flat = [(v, c) for v, cs in pool.items() for c in cs]
        keys = {key_of(v, c) for v, c in flat}
        preferred = self._preferred(flat, reading, bucket, spaces)
        if preferred is not flat and preferred:
            return preferred[0], "the direction you asked for"
        studies = self._study(ctx, views)
        climb = self._climb(spaces, bucket, keys, self._inert(spaces, bucket, tries))
        if climb is None and not tries:
            # The very first try of a task without variants: one step from the incumbent (its
            # defaults), not a random draw; TPE has nothing to learn from yet.
            inc_key = code_key(ctx.incumbent_source)
            for s in spaces:
                if code_key(s.render(s.default())) == inc_key:
                    start = BucketView(bucket.name, bucket.contains, best=Try(0, s.variant, s.default(), "kept"))
                    climb = self._climb(spaces, start, keys)
                    if climb is not None:
                        climb = (climb[0], climb[1].replace("the bucket's best", "the incumbent"))
                    break
        # A GPU run affords tens of tries, not hundreds: TPE over a few points samples nearly at
        # random, so a step from the bucket's best comes first; TPE explores every EXPLORE_EVERY-th
        # pick once the bucket has TPE_AFTER timed points, and whenever no step is left. Nothing
        # timed at all (no GPU): there is no best to climb from, and TPE's draws are as good as any.
        timed = studies.counts(bucket.name).get("COMPLETE", 0) if studies is not None else 0
        explore = studies is not None and timed >= TPE_AFTER and ctx.iteration % EXPLORE_EVERY == 0
        if climb is not None and not explore:
            return climb
        if studies is not None:
            counts = studies.counts(bucket.name)
            pruned = counts.get("PRUNED", 0)
            for i in range(ASKS):
                try:
                    with self._lock:
                        v, c = studies.ask(bucket.name, spaces, seed=ctx.iteration * 100 + i)
                except Exception:  # a sampler failure must not end the run: climb instead
                    break
                if key_of(v, c) in keys:
                    done = counts.get("COMPLETE", 0)
                    return (v, c), (f"Optuna TPE's suggestion from {done} timed configuration"
                                    f"{'' if done == 1 else 's'}"
                                    + (f" ({pruned} pruned: far slower than the best on the bucket's "
                                       "smallest shape, their region sampled less)" if pruned else ""))
        if climb is not None:
            return climb
        return flat[0], "the next untried configuration in grid order"

    # -- the model strategy (harness.agents.tunemodel) ----------------------------------------
    def _grid(self, space: Space, limits: dict) -> tuple[list[dict], list[tuple], set[tuple]]:
        """The space's feasible configurations and their keys, computed once per source and limits
        (split.py's 13824 combinations take a few hundred ms to check, and every proposal asks)."""
        k = (space.variant, code_key(space.source), tuple(sorted(limits.items())))
        if k not in _GRIDS:
            grid = space.grid(limits)
            keys = [key_of(space.variant, c) for c in grid]
            _GRIDS[k] = (grid, keys, set(keys))
        return _GRIDS[k]

    @staticmethod
    def _baseline_try(ctx, spaces) -> Try | None:
        """The task's baseline as a try of its variant: the first evaluation timed it as the incumbent
        (its figures are in that verdict), so it needs no evaluation of its own."""
        base_key = code_key(ctx.task.baseline_path.read_text()) if ctx.task.baseline_path else None
        space = next((s for s in spaces if code_key(s.render(s.default())) == base_key), None)
        first = min((a for a in ctx.history if a.shapes), key=lambda a: a.iteration, default=None)
        if space is None or first is None:
            return None
        shapes = [{**s, "candidate_us": s.get("incumbent_us"),
                   "roofline_pct": s["roofline_pct"] * s["candidate_us"] / s["incumbent_us"]
                   if s.get("roofline_pct") and s.get("candidate_us") and s.get("incumbent_us") else None}
                  for s in first.shapes]
        return Try(0, space.variant, space.default(), "reverted", shapes)

    @staticmethod
    def _noise(tries: list[Try]) -> float:
        """The timing noise as a standard deviation of one measured log time, from the verdicts' bands
        (the half-width of a 99% interval of a ratio of two medians: 2.58 x 1.41 of it)."""
        bands = sorted(s["noise_pct"] for t in tries for s in t.shapes if isinstance(s.get("noise_pct"), (int, float)))
        return bands[len(bands) // 2] / 100 / 3.65 if bands else 0.005

    def _points(self, bucket: BucketView, tries: list[Try]) -> dict[str, list[tunemodel.Point]]:
        out: dict[str, list[tunemodel.Point]] = {}
        for t in tries:
            mine = self._in(bucket, t)
            if not t.ok or not mine or any(not s.get("candidate_us") or not s.get("correct", True) for s in mine):
                continue
            out.setdefault(t.variant, []).append(tunemodel.Point(
                t.config, {str(s.get("name")): float(s["candidate_us"]) for s in mine}, t.iteration, t.aimed))
        return out

    def _stalled(self, bucket: BucketView, tries: list[Try], noise: float) -> int:
        """How many of the latest tries aimed at the bucket, in a row, gained nothing there."""
        pts = sorted((p for ps in self._points(bucket, tries).values() for p in ps), key=lambda p: p.iteration)
        n = 0
        for i in range(len(pts) - 1, -1, -1):
            if pts[i].aimed != bucket.name:
                continue
            before = [p.log_us for p in pts[:i]]
            if before and pts[i].log_us < min(before) - max(noise, 0.005):
                break
            n += 1
        return n

    def _pick_model(self, spaces, pool_keys, views: list[BucketView], live: list[BucketView], tries: list[Try],
                    baseline: Try | None, limits: dict):
        """(choice, why, bucket) by the model strategy, or None when nothing is timed (no GPU) or no
        move is worth anything: the walk and TPE take over."""
        timed = ([baseline] if baseline is not None else []) + tries
        if not any(s.get("candidate_us") for t in timed for s in t.shapes):
            return None
        noise = self._noise(tries)
        tol = max(tunemodel.SAME, noise)
        by_variant = {s.variant: s for s in spaces if s.params}
        points = {b.name: self._points(b, timed) for b in views}
        leader = {b.name: min(points[b.name], key=lambda v: min(p.log_us for p in points[b.name][v]))
                  for b in views if points[b.name]}
        # The variant that leads the most buckets is climbed in every bucket, measured against its own
        # best there: a bucket led by another variant may go to it once it wins there (rmsnorm's
        # split.py on decode rows, where kernel.py's defaults lead until split's tile is set).
        counts = {v: sum(1 for x in leader.values() if x == v) for v in leader.values()}
        first = max(counts, key=lambda v: (counts[v], -list(counts).index(v)), default=None)
        untried = {v: (lambda c, v=v: key_of(v, c) in pool_keys.get(v, ())) for v in by_variant}
        launchable = {v: (lambda c, v=v, keys=self._grid(s, limits)[2]: key_of(v, c) in keys)
                      for v, s in by_variant.items()}
        bases: dict[str, list[tunemodel.Base]] = {}
        for b in live:
            for v in dict.fromkeys([leader.get(b.name), first]):
                if v in by_variant and v in points[b.name]:
                    space = by_variant[v]
                    bases.setdefault(b.name, []).append(
                        tunemodel.Base.of(b.name, v, space.params, points[b.name][v], noise, tol))
        stalled = {b.name: self._stalled(b, timed, noise) for b in live}

        def turn(b: BucketView) -> float:
            # The bucket furthest from its roofline (shapes of 10 us and more), each try in a row aimed
            # at it that gained nothing counting STALL_PCT against it.
            pct = b.min_pct if b.counted else b.pct
            return (pct if pct is not None else 0.0) + STALL_PCT * stalled[b.name]

        plans: dict[str, tuple] = {}
        for reach in (tunemodel.REACH, 1 << 20):  # near the bases first; any value of a knob once those are tried
            for b in live:
                # Its leader's move, or the leading variant's where that is worth more.
                moves = [(base, base.best(launchable[base.variant], untried[base.variant], reach))
                         for base in bases.get(b.name, [])]
                moves = [(base, m) for base, m in moves if m is not None]
                if moves:
                    plans[b.name] = max(moves, key=lambda bm: bm[1].gain)  # (the first of equals: the leader)
            if plans:
                break
        else:
            return None
        # A bucket with a move worth something first; among those, its turn; else the least bad move.
        promising = [b for b in live if b.name in plans and plans[b.name][1].gain > 0]
        bucket = (min(promising, key=turn) if promising
                  else max((b for b in live if b.name in plans), key=lambda b: plans[b.name][1].gain))
        base, move = plans[bucket.name]
        config, served = self._fill(base, move, bases, live, launchable, untried)
        space = by_variant[base.variant]
        order = {p.name: i for i, p in enumerate(space.params)}
        pct = bucket.min_pct if bucket.counted else bucket.pct
        steps = ", ".join(f"{k} {base.config.get(k)}->{config[k]}" for k in sorted(move.config, key=order.get)
                          if move.config[k] != base.config.get(k) and not base.same.free(k))
        how = {"step": "a move", "joint": "a joint move of two knobs that each gained",
               "fit": f"an untried {move.changed[0]}, with the fewest other knobs moved to fit it"}[move.kind]
        why = (f"for bucket {bucket.name}" + (f" ({pct:.0f}% of roofline" if pct is not None else " (")
               + (f", {stalled[bucket.name]} tr{'y' if stalled[bucket.name] == 1 else 'ies'} in a row gained nothing"
                  if stalled[bucket.name] else "")
               + f"): {how}, {steps} on {_short(base.variant)} from its best there; "
               + f"what the tries so far predict: {(math.exp(-move.mean) - 1) * 100:+.1f}% ±{move.sd * 100:.1f}%")
        if base.free:
            why += f"; it doesn't feel {', '.join(base.free)} (measured)"
        if served:
            why += "; those set as " + " and ".join(served) + " would have them"
        return (base.variant, config), why, bucket

    def _fill(self, base, move, bases, live, launchable, untried) -> tuple[dict, list[str]]:
        """The move's configuration with the knobs it leaves alone set for the other buckets, where
        the move's bucket can't tell the values apart: to another bucket's next move if all of it
        fits so (one evaluation, two searches served), else to that bucket's best. Kept only where
        the result can launch and is untried."""
        config, served, taken = dict(move.config), [], set(move.changed)
        for b in live:
            other = next((o for o in bases.get(b.name, []) if o.variant == base.variant and o.bucket != base.bucket),
                         None)
            if other is None:
                continue
            nxt = other.best(launchable[base.variant], untried[base.variant])
            for source, what in ((nxt, "next move"), (other.point, "best")):
                if source is None:
                    continue
                want = {k: v for k, v in source.config.items() if k not in taken and v != config.get(k)
                        and base.same.same(k, v, config.get(k)) and not other.same.same(k, v, config.get(k))}
                if what == "next move" and not set(nxt.changed) <= set(want):
                    continue
                trial = {**config, **want}
                if want and launchable[base.variant](trial) and untried[base.variant](trial):
                    config, taken = trial, taken | set(want)
                    served.append(f"bucket {b.name}'s {what}")
                    break
        return config, served

    def _inert(self, spaces, bucket: BucketView, tries: list[Try]) -> set[str]:
        """Knobs that don't matter to this bucket, measured: two timed tries of one variant that
        differ only in that knob, within INERT of each other (rows.py's LONG_BLOCK on short rows)."""
        times = {}
        for t in tries:
            mine = self._in(bucket, t)
            if t.ok and mine and all(s.get("candidate_us") for s in mine):
                times[t.key] = (t, tunesearch.geomean([s["candidate_us"] for s in mine]))
        inert, moved = set(), set()
        items = list(times.values())
        for i, (a, ta) in enumerate(items):
            for b, tb in items[i + 1:]:
                if a.variant != b.variant:
                    continue
                diff = [k for k in a.config if a.config.get(k) != b.config.get(k)]
                if len(diff) == 1:
                    (inert if abs(ta - tb) / min(ta, tb) < INERT else moved).add((a.variant, diff[0]))
        return inert - moved

    @staticmethod
    def _climb(spaces, bucket: BucketView, keys, inert=frozenset()) -> tuple[tuple[str, dict], str] | None:
        """One step on one knob from the bucket's best, if one is untried (knobs this bucket
        showed no sensitivity to last)."""
        best = bucket.best
        if best is None:
            return None
        space = next((s for s in spaces if s.variant == best.variant), None)
        params = sorted(space.params if space else [], key=lambda p: (best.variant, p.name) in inert)
        for p in params:
            if best.config.get(p.name) in p.values:
                i = p.values.index(best.config[p.name])
                for j in (i + 1, i - 1):
                    if 0 <= j < len(p.values):
                        c = {**best.config, p.name: p.values[j]}
                        if key_of(best.variant, c) in keys:
                            return (best.variant, c), f"one step on {p.name} from the bucket's best"
        return None

    @staticmethod
    def _preferred(flat, reading, bucket: BucketView, spaces):
        if not reading.prefer:
            return flat
        ref = bucket.best
        out = []
        for v, c in flat:
            space = next(s for s in spaces if s.variant == v)
            base = ref.config if ref is not None and ref.variant == v else space.default()
            ok = False
            for p in space.params:
                way = reading.prefer.get(p.kind)
                if way is None or p.name not in base:
                    continue
                d = c.get(p.name, 0) - base[p.name]
                if (way == "up" and d > 0) or (way == "down" and d < 0):
                    ok = True
                elif d != 0:
                    ok = False
                    break
            if ok:
                out.append((v, c))
        return out

    def _study(self, ctx, views):
        if not tunesearch.available():
            return None
        names = tuple(b.name for b in views)
        with self._lock:
            if self._studies is not None and self._spaces_key == names:
                return self._studies
            path = self.session_dir / "tuner" / "optuna.journal" if self.session_dir else None
            self._studies = tunesearch.Studies(path, ctx.task.name, list(names))
            self._spaces_key = names
        return self._studies


def _size(shape: dict) -> int:
    n = 1
    for v in (shape.get("dims") or {}).values():
        n *= int(v) if isinstance(v, (int, float)) else 1
    return n

"""The offline default agent: a joint search over declared spaces and structurally different variants.

What it searches (harness.agents.tunespace): each variant the task lists in task.toml
(`variants = ["kernel.py", "variants/rows.py", ...]`, else the incumbent alone), over the values its
`# warpsmith: tune NAME in [...]` comments declare and, where nothing is declared, a ladder around
each literal knob (launch num_warps / num_stages / blocks, UPPER_CASE module ints). Configurations
that fail a `# warpsmith: require` line or the hardware's limits are never proposed.

How (harness.agents.tunesearch): each variant's own defaults first, then, per shape bucket of the
task (the one furthest from its roofline first), Optuna's TPE over variant x knobs, fed every earlier
result; a configuration that lost badly on the bucket's smallest shape is recorded as pruned; when
TPE only suggests what was tried, it climbs one step from the bucket's best. A bucket whose best is
within 10% of the roofline (copy bandwidth) is done. Winners per bucket come out through the
loop's per-bucket keeps (`--keep-buckets auto`) and `sessions export`.

It also reads what it can from the person's ideas and veto reasons (harness.agents.tuneideas), and
says in its reasoning what it took and what it can't use. Nothing is ever proposed twice: tries are
rebuilt from the journal, and the studies live in `<session>/tuner/` so a resume continues them.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from harness import sourcefile
from harness.agents import tuneideas, tunesearch
from harness.agents.base import AgentEvent, Exhausted, Proposal, ProposalContext, ReasoningChunk, code_key
from harness.agents.tuner_knobs import (PY, WARPS, Knob, apply, config_of, find_knobs,  # noqa: F401 (re-exported)
                                        kind_of, neighbours)
from harness.agents.tunespace import Space, SpaceError, hardware_limits, read_space

DONE_PCT = 90.0  # a bucket within 10% of its roofline is not searched further
MIN_ROOFLINE_US = 10.0  # shorter shapes are launch-bound: they don't count toward "done"
EXPLORE_EVERY = 3  # once a bucket has TPE_AFTER timed points, every 3rd pick is TPE's even if a climb is open
TPE_AFTER = 4
INERT = 0.02  # a knob whose one-step change moved a bucket's time by less than this is skipped there
ASKS = 12  # TPE suggestions tried before climbing from the bucket's best instead


@dataclass
class Try:
    iteration: int
    variant: str
    config: dict
    outcome: str
    shapes: list[dict] = field(default_factory=list)

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
    counted: int = 0  # shapes with a roofline time >= MIN_ROOFLINE_US

    absent: bool = False  # measured shapes exist, none of them in this bucket (e.g. the interpreter's)

    @property
    def done(self) -> bool:
        return self.counted > 0 and self.min_pct is not None and self.min_pct >= DONE_PCT


def _label(config: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def _short(variant: str) -> str:
    return Path(variant).name if variant != "incumbent" else "incumbent"


class TunerAgent:
    name = "tuner"
    model = ""
    reads_prompt = False  # it edits constants; a measured profile in the prompt would go unread

    def __init__(self, session_dir: Path | None = None):
        self.session_dir = Path(session_dir) if session_dir else None
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
            out.append(read_space(source, str(rel)))
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
        # specs_of's names: the datasheet's mem_tb_s (an older pack's hbm_tb_s) when nothing was measured
        bw = (specs.get("measured_copy_tb_s") or specs.get("mem_tb_s") or 0) * 1e6  # bytes per us
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
            pcts, counted = [], []
            for s in self._in(b, b.best):
                pct = s.get("roofline_pct")
                roof_us = s["candidate_us"] * pct / 100 if pct else None
                if pct is None and bw and s.get("bytes_moved"):
                    roof_us = s["bytes_moved"] / bw
                    pct = roof_us / s["candidate_us"] * 100
                if pct is None:
                    continue
                pcts.append(pct)
                if roof_us is not None and roof_us >= MIN_ROOFLINE_US:
                    counted.append(pct)
            b.pct = tunesearch.geomean(pcts)
            b.counted = len(counted)
            b.min_pct = min(counted) if counted else None

    # -- the proposal ---------------------------------------------------------------------------
    def propose(self, ctx: ProposalContext) -> Iterator[AgentEvent]:
        try:
            spaces = self.spaces(ctx)
        except SpaceError as e:
            yield Exhausted(f"tuner: {e}")
            return
        spaces = [s for s in spaces if s.params] or spaces
        if not any(s.params for s in spaces):
            yield Exhausted("tuner: nothing to tune: no `# warpsmith: tune` line and no tunable literal "
                            "(launch num_warps/num_stages, UPPER_CASE int constants) in the incumbent")
            return
        limits, specs, hw = hardware_limits(ctx.packs)
        views = self._buckets(ctx.task)  # local: proposer threads (--proposals N) share this agent
        tries = [Try(a.iteration, a.meta["variant"], dict(a.meta.get("config") or {}), a.outcome, list(a.shapes))
                 for a in ctx.history if a.meta.get("variant")]
        tried = {t.key for t in tries}

        inc_key = code_key(ctx.incumbent_source)
        grids = {s.variant: s.grid(limits) for s in spaces}
        by_variant = {s.variant: s for s in spaces}
        for s in spaces:  # the incumbent itself is measured on every try: never propose it
            if code_key(s.render(s.default())) == inc_key:
                tried.add(key_of(s.variant, s.default()))

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
        pinned_spaces = [s for s in spaces if any(n in {p.name for p in s.params} for n in reading.pins)]
        for s in spaces:
            if reading.pins and pinned_spaces and s not in pinned_spaces:
                continue
            cands = grids[s.variant]
            for name, value in reading.pins.items():
                p = next((p for p in s.params if p.name == name), None)
                if p is None:
                    continue
                if value not in p.values:
                    pin_notes.append(f"{name}={value} is not among {_short(s.variant)}'s values {p.values}")
                    continue
                cands = [c for c in cands if c.get(name) == value]
            pool[s.variant] = [c for c in cands if key_of(s.variant, c) not in tried
                               and key_of(s.variant, c) not in reading.excluded]
        left = sum(len(v) for v in pool.values())

        self._status(tries, specs, views)
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
                        + (" — within 10% of roofline, done. " if b.done else ". "))
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
                yield Exhausted("tuner: every bucket is within 10% of its roofline")
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
        flat = [(v, c) for v, cs in pool.items() for c in cs]
        asked = bool(reading.prefer) and bool(self._preferred(flat, reading, BucketView("", lambda d: True), spaces))
        for s in ([] if asked else spaces):
            d = s.default()
            for name, value in reading.pins.items():
                if name in d:
                    d[name] = value
            if any(c == d for c in pool.get(s.variant, [])):
                choice, why = (s.variant, d), "its own defaults, a first look at this variant"
                break
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

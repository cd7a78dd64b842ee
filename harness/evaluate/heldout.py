"""Held-out shapes and hard inputs: correctness where the listed shapes don't look (issue 25, 17).

A kernel fitted to the listed shapes (no tail masks because every listed length is a multiple of
512, a grid that assumes the listed row counts) passes every listed shape and is wrong elsewhere;
a softmax without the max shift passes randn inputs and returns NaN on real logits. So, after the
listed shapes pass, every evaluation also checks, correctness only (never timed):

- held-out shapes, drawn anew with the evaluation's secret seed from the task's `[heldout]` ranges:
  each bucket's edges and a length inside it, a prime, one past a power of two, a length longer
  than any listed one where the range allows; the other ranged dims cycle through a single row, a
  prime, one past a power of two and a random value. Each shape's inputs are capped in bytes (the
  non-bucket dims shrink), so the cost stays bounded.
- hard inputs: every case of reference.py's HARD_CASES (make_inputs with dims["case"] set), on
  each listed shape shrunk the same way (on the GPU), or one interpreter shape per case.
- the input contract (task.toml [contract], harness.authoring.contract, issue 37): every item beyond the
  plain inputs (a row-strided or transposed view, each -inf mask, the range of magnitudes) on the
  same shapes as a hard case, its inputs built after make_inputs by harness.authoring.contract.apply, in the
  parent and in the child alike.

One call per shape or case, the allocator's free memory drawn per call from the secret (poisoned,
so an element never written shows up, or holding a user's kind of memory: correctness.drawn_fill).
A failure rejects the candidate with `heldout-incorrect`, `hard-case-incorrect` or the contract
item's rule (`contract-strides`, `contract-masks`, `contract-values`; a crash on the item too: a
kernel that can't take what the contract allows is rejected, never skipped), its message naming the
shape's dims, the case or the item. The verdict lists what was checked (`heldout`, `hard_cases`,
`contract`).
"""
from __future__ import annotations

import math
import random
import time
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.authoring.contract import case_rule
from harness.authoring.contract import describe as describe_case
from harness.evaluate.correctness import _as_out, _crash_message, _make, _nbytes, drawn_fill, poison_fill
# shape_bytes lives in correctness (which orders shapes by it, a layer below); tests import it from here.
from harness.evaluate.correctness import shape_bytes  # noqa: F401
from harness.evaluate.process import ChildFailed, derive_seed
from harness.authoring.tasks import Shape, Task, compare, hard_cases

if TYPE_CHECKING:
    from harness.evaluate.process import ChildProcess, EvalOptions, _Run

HARD_MAX_BYTES_GPU = 16 * 2**20   # a hard case's inputs on the GPU (a listed shape, shrunk): outputs cross a pipe


# -- drawing the shapes ---------------------------------------------------------------------------

def _is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    return all(n % f for f in range(3, math.isqrt(n) + 1, 2))


def _prime_in(rng: random.Random, lo: int, hi: int) -> int | None:
    """A random prime in [lo, hi] (trial division: bounds here are at most a few million)."""
    start = rng.randint(lo, hi)
    for n in list(range(start, hi + 1)) + list(range(start - 1, lo - 1, -1)):
        if _is_prime(n):
            return n
    return None


def _pow2_plus_one(rng: random.Random, lo: int, hi: int) -> int | None:
    """2^k + 1 in [lo, hi], k >= 3 where the range allows (9, 17, 33...: past a tile boundary)."""
    ks = [k for k in range(1, 62) if lo <= 2**k + 1 <= hi]
    big = [k for k in ks if k >= 3]
    return 2 ** rng.choice(big or ks) + 1 if ks else None


def _resolve(bounds: tuple, dims: dict) -> tuple[int, int]:
    lo, hi = (dims[b] if isinstance(b, str) else b for b in bounds)
    return lo, max(lo, hi)


def shrink(ref_mod: ModuleType, task: Task, dims: dict, ranges: dict[str, tuple], keep: set[str],
           max_bytes: int) -> dict:
    """Halve the ranged dims not in `keep` (numeric bounds only; the largest relative to its lower
    bound first) until the inputs fit in max_bytes or nothing can shrink. Dims bounded by another
    dim are clipped to it afterwards (min_ctx <= ctx)."""
    dims = dict(dims)
    free = [d for d, b in ranges.items() if d not in keep and all(isinstance(x, int) for x in b) and d in dims]
    while shape_bytes(ref_mod, task, dims) > max_bytes:
        can = [d for d in free if dims[d] > ranges[d][0]]
        if not can:
            break
        d = max(can, key=lambda k: dims[k] / max(ranges[k][0], 1))
        dims[d] = max(ranges[d][0], dims[d] // 2)
        for dd, b in ranges.items():
            if dd in dims and any(isinstance(x, str) for x in b):
                lo, hi = _resolve(b, dims)
                dims[dd] = min(max(dims[dd], lo), hi)
    return dims


def _main_dim(task: Task, ranges: dict[str, tuple]) -> str | None:
    """The dim the held-out lengths vary: the buckets' dim, else the first with numeric bounds."""
    for b in task.buckets:
        if b.dim in ranges:
            return b.dim
    return next((d for d, b in ranges.items() if all(isinstance(x, int) for x in b)), None)


_KINDS = ("the smallest", "a prime", "one past a power of two", "random")


def _pick(rng: random.Random, kind: str, lo: int, hi: int) -> tuple[int, str]:
    v = {"the smallest": lo, "a prime": _prime_in(rng, max(lo, 2), hi) if hi >= 2 else None,
         "one past a power of two": _pow2_plus_one(rng, lo, hi)}.get(kind)
    return (v, kind) if v is not None else (rng.randint(lo, hi), "random")


def draw_shapes(task: Task, ref_mod: ModuleType, on_gpu: bool, secret: int) -> list[tuple[Shape, str]]:
    """This evaluation's held-out shapes, each with why it was drawn (see the module docstring).
    Deterministic in `secret`, so a verdict's shapes can be drawn again."""

    spec = task.heldout
    if spec is None:
        return []
    ranges = spec.ranges_for(on_gpu)
    main = _main_dim(task, ranges)
    if main is None:
        return []
    rng = random.Random(derive_seed(secret, "heldout"))
    listed = task.shapes_for(on_gpu)
    lo, hi = ranges[main]
    values: list[tuple[int, str]] = []
    buckets = [b for b in task.buckets if b.dim == main]
    for b in buckets:
        blo, bhi = max(b.lo, lo), min(b.hi - 1, hi)
        if blo <= bhi:
            values += [(blo, f"{b.name} bucket's lower edge"), (bhi, f"{b.name} bucket's upper edge"),
                       (rng.randint(blo, bhi), f"inside the {b.name} bucket")]
    if not buckets:
        values += [(lo, "the smallest"), (hi, "the largest"), (rng.randint(lo, hi), "random")]
    values += [_pick(rng, "a prime", max(lo, 3), hi)] if hi >= 3 else []
    values += [_pick(rng, "one past a power of two", lo, hi)]
    longest = max(s.dims[main] for s in listed)
    if hi > longest:
        values.append((rng.randint(longest + 1, hi), f"beyond every listed one ({longest})"))
    seen: set[int] = set()
    values = [(v, why) for v, why in values if not (v in seen or seen.add(v))]

    # The other ranged dims: numeric bounds first, then those bounded by another dim (min_ctx <= ctx).
    others = sorted((d for d in ranges if d != main), key=lambda d: any(isinstance(x, str) for x in ranges[d]))
    out = []
    for i, (v, why) in enumerate(values):
        dims = {**rng.choice(listed).dims, main: v}
        whys = [f"{main}: {why}"]
        for k, d in enumerate(others):
            dims[d], kind = _pick(rng, _KINDS[(i + k) % len(_KINDS)], *_resolve(ranges[d], dims))
            whys.append(f"{d}: {kind}")
        dims = shrink(ref_mod, task, dims, ranges, {main}, spec.max_bytes_for(on_gpu))
        name = "held-out " + ", ".join(f"{d} {dims[d]}" for d in [main, *others])
        out.append((Shape(name, dims), "; ".join(whys)))
    cap = spec.max_shapes_for(on_gpu)
    if cap and len(out) > cap:
        # A seeded subset, over many evaluations every kind drawn; but the shortest and the longest
        # always: a fit breaks at the ends of the range (a fixed chunk count
        # at the longest row; a divisor rounded to 8 at one column).
        out = sorted(out, key=lambda p: p[0].dims[main])
        ends = [out[0], out[-1]] if cap >= 2 else [out[-1]]
        out = sorted(ends + rng.sample(out[1:-1], cap - len(ends)), key=lambda p: p[0].dims[main])
    return out


def hard_case_shapes(task: Task, ref_mod: ModuleType, shapes: list[Shape], on_gpu: bool) -> list[tuple[str, Shape]]:
    """(case, shape) pairs: on the GPU every case on every shape run (shrunk to fit), in the
    interpreter each case on one shape, in turn (the interpreter is slow), and on the widest."""
    return case_shapes(task, ref_mod, shapes, on_gpu, list(hard_cases(ref_mod) or {}))


def contract_case_shapes(task: Task, ref_mod: ModuleType, shapes: list[Shape], on_gpu: bool) -> list[tuple[dict, Shape]]:
    """(contract case, shape) pairs, on the shapes a hard case would get."""
    cases = task.contract.cases()
    pairs = case_shapes(task, ref_mod, shapes, on_gpu, list(range(len(cases))))
    return [(cases[i], s) for i, s in pairs]


def case_shapes(task: Task, ref_mod: ModuleType, shapes: list[Shape], on_gpu: bool, cases: list) -> list[tuple[Any, Shape]]:
    """(case, shape) pairs for `cases` (see hard_case_shapes)."""
    if not cases or not shapes:
        return []
    ranges = task.heldout.ranges_for(on_gpu) if task.heldout else {}
    keep = {b.dim for b in task.buckets} | {_main_dim(task, ranges)}  # the lengths the kernel's paths key on
    if on_gpu:
        small = [Shape(s.name, shrink(ref_mod, task, s.dims, ranges, keep, HARD_MAX_BYTES_GPU)) for s in shapes]
        return [(c, s) for c in cases for s in small]
    # Interpreter: the other ranged dims (rows, batch) down to 2 at most: the case is in the values.
    small = []
    for s in shapes:
        dims = {d: (min(v, max(ranges[d][0], 2)) if d in ranges and d not in keep
                    and all(isinstance(x, int) for x in ranges[d]) else v) for d, v in s.dims.items()}
        for d, b in ranges.items():
            if d in dims and any(isinstance(x, str) for x in b):
                dims[d] = min(max(dims[d], _resolve(b, dims)[0]), _resolve(b, dims)[1])
        small.append(Shape(s.name, dims))
    pairs = [(c, small[i % len(small)]) for i, c in enumerate(cases)]
    # And every case on the widest shape: a case whose failure depends on where in a row the odd
    # value sits (one huge value past a sampled max) never bites on a row narrower than the sample.
    main = _main_dim(task, ranges)
    widest = max(small, key=lambda s: s.dims.get(main, 0) if isinstance(s.dims.get(main), int) else 0)
    return pairs + [(c, widest) for c in cases if (c, widest) not in pairs]


# -- checking them --------------------------------------------------------------------------------

def _describe(dims: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in dims.items() if k != "case")


def check(run: "_Run", v: dict, child: "ChildProcess", task: Task, ref_mod: ModuleType, shapes: list[Shape],
          on_gpu: bool, opts: "EvalOptions", secret: int) -> bool:
    """Run the held-out shapes and the hard cases in the candidate's child; True when all pass.
    Fills v["heldout"] and v["hard_cases"]; failures go into run.reasons (stage correctness)."""

    t0 = time.monotonic()
    heldout = v.setdefault("heldout", [])
    hard = v.setdefault("hard_cases", [])
    checked = v.setdefault("contract", [])
    dtype = task.dtypes[0]
    work: list[tuple[str, str, Shape, dict, dict | None]] = []
    for s, why in draw_shapes(task, ref_mod, on_gpu, secret):
        entry = {"name": s.name, "dims": dict(s.dims), "why": why, "correct": None, "error": None}
        heldout.append(entry)
        work.append(("heldout-incorrect", f"[{s.name}] ", s, entry, None))
    for case, s in hard_case_shapes(task, ref_mod, shapes, on_gpu):
        dims = {**s.dims, "case": case}
        entry = {"case": case, "shape": s.name, "dims": dict(s.dims), "correct": None, "error": None}
        hard.append(entry)
        work.append(("hard-case-incorrect", f"[hard case {case!r} on {s.name} ({_describe(dims)})] ",
                     Shape(f"{s.name} / {case}", dims), entry, None))
    for item, s in contract_case_shapes(task, ref_mod, shapes, on_gpu):
        what = describe_case(item)
        entry = {"item": what, "rule": case_rule(item), "shape": s.name, "dims": dict(s.dims), "correct": None,
                 "error": None}
        checked.append(entry)
        work.append((case_rule(item), f"[contract: {what}, on {s.name} ({_describe(s.dims)})] ",
                     Shape(f"{s.name} / contract {what}", dict(s.dims)), entry, item))

    ok = True
    poison = poison_fill(derive_seed(secret, "poison"))
    for rule, tag, shape, entry, item in work:
        seed = derive_seed(secret, "heldout", shape.name)
        xs, exp = _make(ref_mod, task, shape, seed, on_gpu, item)
        try:
            reply, outs = child.request({"op": "call", "role": "candidate", "dims": shape.dims, "seed": seed,
                                         "contract": item, "out_nbytes": _nbytes(exp),
                                         "fill": drawn_fill(derive_seed(secret, "fill", shape.name), poison)},
                                        opts.run_timeout_s)
        except ChildFailed as e:  # the child died on this shape: the verdict says on which
            entry.update(correct=False, error=f"{e.rule}: {e.message}"[:500])
            if item:  # dying on what the contract allows is failing it: the item's rule, the death in words
                raise ChildFailed(rule, f"{tag}{e.rule}: {e.message}") from None
            raise ChildFailed(e.rule, f"{tag}{e.message}") from None
        if not reply.get("ok"):
            err = _crash_message(reply)
        else:
            for o in reply.get("observed", []):
                run.reject("guard", o["rule"], tag + o["message"])
            err = None if len(outs) == reply.get("n_out", 1) else "the output is not a plain tensor"
            err = err or compare(task, ref_mod, _as_out(outs, reply["n_out"]), exp, tuple(xs), dtype)
        entry.update(correct=err is None, error=err.splitlines()[0][:500] if err else None)
        if err:
            ok = False
            run.reject("correctness", rule, tag + err)
    if work:
        run.notes.append(f"held-out: {len(heldout)} shape(s), {len(hard)} hard input(s) and {len(checked)} contract "
                         f"case(s) checked, correctness only, in {time.monotonic() - t0:.1f} s")
    elif task.heldout is None and not hard_cases(ref_mod):
        run.notes.append("the task declares no [heldout] ranges, no HARD_CASES and no [contract] beyond contiguous "
                         "inputs: only the listed shapes were checked")
    return ok

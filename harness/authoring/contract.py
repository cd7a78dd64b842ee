"""A task's input contract (task.toml `[contract]`, issue 37): what a caller may pass, how an output
is judged, and the inputs that check both.

Tests that only ever pass contiguous randn inputs accept kernels that are wrong on what users pass:
a view of the first columns of a wider tensor, a transposed tensor, rows that start with a block of
-inf (left padding), logits of 1e4; and an elementwise tolerance that is right for one value is
blind to a row of 20000 small probabilities all dropped. So a task declares, per argument of
`reference()`, what a caller may pass, and how its output is judged:

    [contract]
    error = "rows"                  # "elements" (default): atol/rtol per element; "rows": that, and
    row_rtol = 1e-2                 #   each row's L1 error within row_rtol x the row's L1 norm (+ atol)
    [contract.invariants]           # properties of the candidate's own output (INVARIANTS)
    rows-sum-to-1 = 1e-2            #   name = tolerance
    [contract.inputs.x]             # one entry per argument of reference(), every one named
    dtype = "task"                  # "task" (the task's dtype), a torch dtype name, "int" or "bool"
    layouts = ["contiguous", "row-strided", "transposed"]     # LAYOUTS
    masks = ["-inf leading", "-inf all but one"]              # MASKS
    max_abs = 1e4                   # magnitudes a caller may pass (rows scaled up to it)
    min_abs = 1e-4                  # optional: and down to it

Every item beyond what make_inputs already makes (a contiguous tensor of its values) is a contract
case: one call per item and shape (harness/evaluate/heldout.py), its input built by `apply` below
from the inputs make_inputs made for the call's seed, the same way in the parent (which computes the
reference on it) and in the child (which the parent names the seed and the case). A candidate that
is wrong on a case, or raises on it, is rejected with the item's rule (CASE_RULES), never skipped.

The views are filled with values a caller could have (the rest of a wider tensor holds other rows'
values, not NaN): a kernel that sniffed for a test's padding would learn nothing from it.

torch is imported inside the functions that build tensors: every command imports harness.authoring.tasks,
which imports this module for the schema, and torch takes seconds to load.
"""
from __future__ import annotations

import inspect
import math
import random
from dataclasses import dataclass, field
from typing import Any, Callable

LAYOUTS = {
    "contiguous": "a contiguous tensor (what make_inputs makes)",
    "row-strided": "a view of the first n columns of a wider tensor (x[:, :n]): rows further apart than n",
    "transposed": "the last two dims swapped in memory (y.t() of a contiguous y): unit stride on the rows",
}
MASKS = {
    "-inf scattered": "-inf at random places along the last dim, one entry of each row finite",
    "-inf leading": "a block of -inf at the start of each row (left padding), up to all but the last entry",
    "-inf trailing": "a block of -inf at the end of each row (right padding), up to all but the first entry",
    "-inf both ends": "blocks of -inf at both ends of each row (padding on both sides), a finite middle",
    "-inf all but one": "every entry of a row -inf but one: the last, the first, or one in between",
    "-1 trailing": "indices padded with -1 at the end of each row (entries to skip), up to a whole row",
}
# What each row of a contract case is checked under.
CASE_RULES = {"layout": "contract-strides", "mask": "contract-masks", "values": "contract-values"}
ERRORS = ("elements", "rows")
_DTYPES = ("task", "float32", "float16", "bfloat16", "float64", "int32", "int64", "int16", "int8", "uint8", "bool",
           "int")
# The keys of [contract] and of each [contract.inputs.NAME] (harness.authoring.tasks checks a task.toml's keys against them).
INPUT_KEYS = ("dtype", "layouts", "masks", "max_abs", "min_abs")
KEYS = ("error", "row_rtol", "invariants", "inputs")


class ContractError(Exception):
    """A malformed [contract]: `key` is the dotted key under task.toml's root, `problem` says what."""

    def __init__(self, key: str, problem: str):
        self.key, self.problem = key, problem
        super().__init__(f"{key}: {problem}")


@dataclass(frozen=True)
class InputContract:
    name: str
    index: int                       # position among reference()'s arguments
    dtype: str = "task"
    layouts: tuple[str, ...] = ("contiguous",)
    masks: tuple[str, ...] = ()
    max_abs: float | None = None
    min_abs: float | None = None


@dataclass(frozen=True)
class Contract:
    inputs: tuple[InputContract, ...] = ()
    error: str = "elements"
    row_rtol: float | None = None    # None: the task's rtol
    invariants: dict[str, float] = field(default_factory=dict)
    declared: bool = False           # False: the default of a task.toml without [contract]

    def cases(self) -> list[dict]:
        """One contract case per item beyond the contiguous plain inputs, in a fixed order: each a
        JSON-able dict that `apply` reads ({"arg", "name"} and one of layout | mask | values)."""
        out: list[dict] = []
        for inp in self.inputs:
            base = {"arg": inp.index, "name": inp.name}
            out += [{**base, "layout": lay} for lay in inp.layouts if lay != "contiguous"]
            out += [{**base, "mask": m} for m in inp.masks]
            if inp.max_abs is not None or inp.min_abs is not None:
                out.append({**base, "values": [inp.min_abs, inp.max_abs]})
        return out


def case_rule(case: dict) -> str:
    return next(rule for key, rule in CASE_RULES.items() if key in case)


def describe(case: dict) -> str:
    """A case in words, for a verdict's message: `x as a transposed view`, `x with -inf leading`."""
    name = case["name"]
    if "layout" in case:
        return f"{name} as a {case['layout']} view"
    if "mask" in case:
        return f"{name} with {case['mask']}"
    lo, hi = case["values"]
    return f"{name} with rows scaled to magnitudes " + (f"{lo:g} to {hi:g}" if lo is not None else f"up to {hi:g}")


# -- the schema ----------------------------------------------------------------------------------

def _number(v: Any, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ContractError(key, f"must be a positive number, got {v!r}")
    return float(v)


def _names(v: Any, key: str, known: dict[str, str]) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ContractError(key, f"must be a list of strings drawn from {', '.join(map(repr, known))}")
    bad = [x for x in v if x not in known]
    if bad:
        raise ContractError(key, f"unknown {bad[0]!r} (known: {', '.join(map(repr, known))})")
    if len(set(v)) != len(v):
        raise ContractError(key, "lists an item twice")
    return tuple(v)


def parse(raw: Any, params: list[str]) -> Contract:
    """task.toml's [contract] table read against reference()'s parameter names; ContractError names
    the key. Without a table: every argument contiguous, of what make_inputs makes, judged per element."""
    if raw is None:
        return Contract(tuple(InputContract(p, i) for i, p in enumerate(params)))
    if not isinstance(raw, dict):
        raise ContractError("contract", "must be a table")
    for k in raw:
        if k not in KEYS:
            raise ContractError(f"contract.{k}", f"unknown key (known: {', '.join(sorted(KEYS))})")
    error = raw.get("error", "elements")
    if error not in ERRORS:
        raise ContractError("contract.error", f"{error!r}: must be one of {', '.join(map(repr, ERRORS))}")
    row_rtol = raw.get("row_rtol")
    if row_rtol is not None:
        row_rtol = _number(row_rtol, "contract.row_rtol")
        if error != "rows":
            raise ContractError("contract.row_rtol", "only means something with error = \"rows\"")
    inv_raw = raw.get("invariants", {})
    if not isinstance(inv_raw, dict):
        raise ContractError("contract.invariants", "must be a table of name = tolerance")
    invariants = {}
    for name, tol in inv_raw.items():
        if name not in INVARIANTS:
            raise ContractError(f"contract.invariants.{name}", f"unknown invariant (known: {', '.join(INVARIANTS)})")
        invariants[name] = _number(tol, f"contract.invariants.{name}")
    ins = raw.get("inputs")
    if not isinstance(ins, dict):
        raise ContractError("contract.inputs", "missing: one entry per argument of reference() "
                                               f"({', '.join(params)})")
    for name in ins:
        if name not in params:
            raise ContractError(f"contract.inputs.{name}", f"reference() has no argument {name!r} "
                                                           f"(its arguments: {', '.join(params)})")
    missing = [p for p in params if p not in ins]
    if missing:
        raise ContractError("contract.inputs", f"no entry for argument {missing[0]!r} of reference(): the "
                                               "contract names every argument")
    inputs = []
    for i, name in enumerate(params):
        spec, key = ins[name], f"contract.inputs.{name}"
        if not isinstance(spec, dict):
            raise ContractError(key, "must be a table (dtype, layouts, masks, max_abs, min_abs)")
        for k in spec:
            if k not in INPUT_KEYS:
                raise ContractError(f"{key}.{k}", f"unknown key (known: {', '.join(sorted(INPUT_KEYS))})")
        dtype = spec.get("dtype", "task")
        if dtype not in _DTYPES:
            raise ContractError(f"{key}.dtype", f"{dtype!r}: must be one of {', '.join(map(repr, _DTYPES))}")
        layouts = _names(spec.get("layouts", ["contiguous"]), f"{key}.layouts", LAYOUTS)
        if "contiguous" not in layouts:
            raise ContractError(f"{key}.layouts", "must include \"contiguous\" (what make_inputs makes, and "
                                                  "what every other call passes)")
        masks = _names(spec.get("masks", []), f"{key}.masks", MASKS)
        hi = _number(spec["max_abs"], f"{key}.max_abs") if "max_abs" in spec else None
        lo = _number(spec["min_abs"], f"{key}.min_abs") if "min_abs" in spec else None
        if lo is not None and hi is None:
            raise ContractError(f"{key}.min_abs", "needs max_abs too (the range's other end)")
        if lo is not None and lo >= hi:
            raise ContractError(f"{key}.min_abs", f"{lo:g} is not below max_abs {hi:g}")
        inputs.append(InputContract(name, i, dtype, layouts, masks, hi, lo))
    return Contract(tuple(inputs), error, row_rtol, invariants, declared=True)


def reference_params(fn: Callable) -> list[str] | None:
    """reference()'s positional parameter names, None where it takes *args (nothing to name)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in sig.parameters.values()):
        return None
    return [p.name for p in sig.parameters.values() if p.kind in kinds]


def check_against_inputs(contract: Contract, xs: list, task_dtype: str) -> str | None:
    """What the declared contract says against one set make_inputs made: None, or the first
    mismatch as `(key, problem)` text. A contract can't claim a dtype, a layout or a mask the inputs
    can't take (a view of a 1-D tensor, -inf in an int tensor)."""
    import torch  # (start-up: see the module docstring)

    if len(xs) != len(contract.inputs):
        return f"contract.inputs: make_inputs made {len(xs)} inputs, the contract names {len(contract.inputs)}"
    for inp, x in zip(contract.inputs, xs):
        key = f"contract.inputs.{inp.name}"
        want = task_dtype if inp.dtype == "task" else inp.dtype
        if want in ("int", "bool"):
            if type(x) is not {"int": int, "bool": bool}[want]:
                return f"{key}.dtype: declared {want!r}, make_inputs made {type(x).__name__}"
            if inp.layouts != ("contiguous",) or inp.masks or inp.max_abs:
                return f"{key}: a Python {want} has no layouts, masks or magnitudes"
            continue
        if not isinstance(x, torch.Tensor):
            return f"{key}.dtype: declared {want!r}, make_inputs made {type(x).__name__}"
        if x.dtype != getattr(torch, want):
            return f"{key}.dtype: declared {want!r}, make_inputs made {str(x.dtype).removeprefix('torch.')}"
        if not x.is_contiguous():
            return f"{key}.layouts: make_inputs made a non-contiguous tensor (the plain calls pass it as made)"
        if any(lay != "contiguous" for lay in inp.layouts) and x.dim() < 2:
            return f"{key}.layouts: a view with other strides needs 2 dims or more; the input has {x.dim()}"
        for m in inp.masks:
            if m.startswith("-inf") and not x.is_floating_point():
                return f"{key}.masks: {m!r} needs a floating-point input, not {x.dtype}"
            if m == "-1 trailing" and (x.is_floating_point() or x.dtype == torch.bool):
                return f"{key}.masks: {m!r} needs an integer input, not {x.dtype}"
            if m == "-1 trailing" and x.dim() and not _trailing_only(x):
                return (f"{key}.masks: declared '-1 trailing', but make_inputs put a -1 before a valid index "
                        "(declare what the inputs are)")
        if inp.max_abs is not None and not x.is_floating_point():
            return f"{key}.max_abs: magnitudes are scaled on a floating-point input, not {x.dtype}"
    return None


def _trailing_only(x: Any) -> bool:
    """No entry other than -1 after a -1, along the last dim."""
    rows = x.reshape(-1, x.shape[-1]) if x.dim() > 1 else x.reshape(1, -1)
    pad = rows == -1
    return bool((pad.int().cummax(dim=1).values.bool() <= pad).all())


# -- judging an output ---------------------------------------------------------------------------

def _rows_sum_to_1(of: Any, tol: float) -> str | None:
    if of.numel() == 0:
        return None
    sums = of.reshape(-1, of.shape[-1]).sum(dim=1) if of.dim() else of.reshape(1)
    off = (sums - 1).abs() > tol
    if off.any():
        r = int(off.nonzero()[0])
        return (f"{int(off.sum())} of {off.numel()} rows do not sum to 1 (row {r} sums to {sums[r].item():.6g}; "
                f"tolerance {tol:g})")
    return None


# name -> (what it says, check(output as float, tolerance) -> reason | None); output-only, so a check
# of sampled rows (a timed output's) can apply it too.
INVARIANTS: dict[str, tuple[str, Callable[[Any, float], str | None]]] = {
    "rows-sum-to-1": ("every row of the output sums to 1 (a probability distribution)", _rows_sum_to_1),
}


def row_errors(of: Any, ef: Any, atol: float, row_rtol: float) -> str | None:
    """Each row's L1 error within row_rtol x its L1 norm, plus atol once (a row of zeros must be
    zeros within one element's tolerance). Rows along the last dim."""
    if of.dim() == 0 or of.numel() == 0:
        return None
    n = of.shape[-1]
    err = (of - ef).abs().reshape(-1, n).sum(dim=1)
    norm = ef.abs().reshape(-1, n).sum(dim=1)
    bad = err > row_rtol * norm + atol
    if not bad.any():
        return None
    r = int(bad.nonzero()[0])
    return (f"{int(bad.sum())} of {bad.numel()} rows off at the row's own scale; row {r}: L1 error "
            f"{err[r].item():.4g} against the row's L1 norm {norm[r].item():.4g} (row_rtol {row_rtol:g}, atol {atol:g})")


# -- building a case's inputs --------------------------------------------------------------------

def apply(xs: list, case: dict | None, seed: int) -> list:
    """The inputs of a contract case: make_inputs's `xs` for `seed` with the case's argument replaced
    by the view, mask or scaling the case names. Deterministic in (xs, case, seed), and made on xs's
    device, so the parent and the child build the same tensor (values, strides)."""
    if not case:
        return xs
    out = list(xs)
    i = int(case["arg"])
    rng = random.Random(f"contract:{seed}:{case.get('layout') or case.get('mask') or 'values'}:{i}")
    x = out[i]
    if "layout" in case:
        out[i] = _view(x, case["layout"], rng)
    elif "mask" in case:
        out[i] = _masked(x, case["mask"], rng, seed)
    elif "values" in case:
        lo, hi = case["values"]
        out[i] = _scaled(x, lo, hi, rng)
    else:
        raise ValueError(f"unknown contract case {case!r}")
    return out


def _view(x: Any, layout: str, rng: random.Random) -> Any:
    import torch  # (start-up: see the module docstring)

    if layout == "transposed":
        return x.transpose(-1, -2).contiguous().transpose(-1, -2)
    if layout != "row-strided":
        raise ValueError(f"unknown layout {layout!r}")
    n = x.shape[-1]
    # A row stride one or three past the row (unaligned), to the next 64 plus 64 (a tile-padded
    # buffer), or twice the row (one of two interleaved halves).
    pad = rng.choice([1, 3, 64 + (-n) % 64, n])
    # The columns past the view hold other rows' values, as the rest of a real wider tensor does.
    other = x.roll(1, dims=-2)
    filler = torch.cat([other] * math.ceil(pad / n), dim=-1)[..., :pad]
    return torch.cat([x, filler], dim=-1)[..., :n]


def _rows(x: Any) -> tuple[int, int]:
    n = x.shape[-1] if x.dim() else 1
    return (x.numel() // n if n else 0), n


def _block_lengths(rng: random.Random, n_rows: int, n: int) -> list[int]:
    """Lengths in [0, n - 1] of a masked block, one a row: the first row nearly the whole row (a first
    tile all masked, whatever the kernel's tile), then the other kinds in turn: over half the row, a
    power of two (a tile boundary), anywhere."""
    if n < 2:
        return [0] * n_rows

    def kind(k: int) -> int:
        if k == 0:
            return n - 1 - rng.randrange(min(4, n - 1))
        if k == 1:
            return rng.randint(n // 2, n - 1)
        if k == 2:
            return 2 ** rng.randint(0, int(math.log2(n - 1)))
        return rng.randint(1, n - 1)

    start = rng.randrange(3)
    return [kind(0) if r == 0 else kind(1 + (start + r) % 3) for r in range(n_rows)]


def _masked(x: Any, mask: str, rng: random.Random, seed: int) -> Any:
    import torch  # (start-up: see the module docstring)

    n_rows, n = _rows(x)
    rows = x.reshape(n_rows, n)
    col = torch.arange(n, device=x.device)[None, :]

    def per_row(vals: list[int]) -> Any:
        return torch.tensor(vals, device=x.device, dtype=torch.int64)[:, None]

    if mask == "-1 trailing":
        # Row 0 all -1, row 1 one index kept, the rest anywhere from none to all.
        keep = [0, 1] + [rng.randint(0, n) for _ in range(max(n_rows - 2, 0))]
        return rows.masked_fill(col >= per_row(keep[:n_rows]), -1).reshape(x.shape)
    if mask == "-inf leading":
        hit = col < per_row(_block_lengths(rng, n_rows, n))
    elif mask == "-inf trailing":
        hit = col >= n - per_row(_block_lengths(rng, n_rows, n))
    elif mask == "-inf both ends":
        total = [max(t, 2) if n > 2 else t for t in _block_lengths(rng, n_rows, n)]  # a block at each end
        left = [rng.randint(1, t - 1) if t >= 2 else t for t in total]
        hit = (col < per_row(left)) | (col >= n - per_row([t - a for t, a in zip(total, left)]))
    elif mask == "-inf all but one":
        at = [n - 1, 0] + [rng.randrange(n) for _ in range(max(n_rows - 2, 0))]
        hit = col != per_row(at[:n_rows])
    elif mask == "-inf scattered":
        g = torch.Generator(device=x.device).manual_seed(seed)
        hit = torch.rand(n_rows, n, generator=g, device=x.device) < torch.rand(n_rows, 1, generator=g, device=x.device)
        hit[torch.arange(n_rows, device=x.device), torch.randint(0, n, (n_rows,), generator=g, device=x.device)] = False
    else:
        raise ValueError(f"unknown mask {mask!r}")
    return rows.masked_fill(hit, float("-inf")).reshape(x.shape)


def _scaled(x: Any, lo: float | None, hi: float, rng: random.Random) -> Any:
    """Rows scaled so that their largest finite magnitude spreads over [lo, hi] (log-uniformly; the
    first row at hi, the second at lo), or over [its own, hi] without lo. -inf stays -inf."""
    import torch  # (start-up: see the module docstring)

    n_rows, n = _rows(x)
    rows = x.reshape(n_rows, n).float()
    top = rows.masked_fill(~torch.isfinite(rows), 0).abs().amax(dim=1)
    targets = []
    for r, t in enumerate(top.tolist()):
        low = lo if lo is not None else max(t, 1e-30)
        targets.append(hi if r == 0 else lo if (r == 1 and lo is not None) else
                       math.exp(rng.uniform(math.log(min(low, hi)), math.log(hi))))
    factor = torch.tensor(targets, device=x.device) / top.clamp(min=1e-30)
    factor = torch.where(top > 0, factor, torch.ones_like(factor))
    return (rows * factor[:, None]).to(x.dtype).reshape(x.shape)


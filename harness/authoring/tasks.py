"""Tasks: kernels/<name>/task.toml + reference.py + kernel.py (the baseline candidate).

A task is data. Loading it checks every field and refuses, in one line naming the file and the
field, anything the evaluator could later trip over. It also refuses a task whose tolerance a null
output (zeros, a constant, a copy of the input) would pass: such a task rewards doing nothing.
The checks that build inputs import torch where they run: it takes seconds, and every command
imports this module.
"""
from __future__ import annotations

import ast
import hashlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from harness import sourcefile
from harness.authoring.contract import INPUT_KEYS as CONTRACT_INPUT_KEYS
from harness.authoring.contract import INVARIANTS, Contract, ContractError, check_against_inputs, reference_params, row_errors
from harness.authoring.contract import KEYS as CONTRACT_KEYS
from harness.authoring.contract import apply as apply_contract
from harness.authoring.contract import describe as describe_case
from harness.authoring.contract import parse as parse_contract
from harness.authoring.paths import builtin_dir
from harness.authoring.tomlkeys import Array, OpenTable, Table, closest, line_of, unknown_keys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_KERNELS = builtin_dir("kernels")
DSLS = ("triton", "cute", "cuda")
DTYPES = ("bfloat16", "float16", "float32")
# Seconds one call of a candidate (one request to its process: a shape's correctness run, its
# timing) may take before it counts as a hang and the process is killed, unless the task says
# otherwise (call_timeout_s / interpreter_call_timeout_s) or `--timeout` does. A call on the GPU
# takes milliseconds plus the first compile; Triton's interpreter is 100-1000x slower.
DEFAULT_CALL_TIMEOUT_S = 120.0
DEFAULT_INTERPRETER_CALL_TIMEOUT_S = 300.0


class TaskError(Exception):
    """A task that can't be loaded. str() is one line: file (and line, where known), field, problem."""

    def __init__(self, path: Path | str, field: str, problem: str, line: int | None = None):
        self.path, self.field, self.problem, self.line = str(path), field, problem, line
        at = f"{self.path}:{line}" if line else self.path
        super().__init__(f"{at}: {field}: {problem}" if field else f"{at}: {problem}")


@dataclass(frozen=True)
class Shape:
    name: str
    dims: dict[str, int]
    tags: tuple[str, ...] = ()
    weight: float = 1.0
    # No keep may slow a protected shape beyond its noise band (task.toml `protected`; long-context
    # shapes by default): a geomean win that does is kept per bucket at most (evaluate.keep_policy).
    protected: bool = False

    @property
    def long(self) -> bool:
        return "long" in self.tags


@dataclass(frozen=True)
class HeldOut:
    """task.toml `[heldout]`: where the shapes no [[shapes]] lists are drawn from, each evaluation
    anew with its secret seed, and checked for correctness only (harness.evaluate.heldout).

    `ranges` maps a dim to inclusive (lo, hi) bounds on the GPU, `interpreter` likewise where only
    Triton's interpreter runs; a bound may name another dim (`min_ctx = [1, "ctx"]`). Dims not named
    keep the value of a listed shape. `max_bytes` caps one shape's inputs (the other dims shrink to
    fit); `max_shapes` caps how many are checked per evaluation."""

    ranges: dict[str, tuple]
    interpreter: dict[str, tuple]
    max_bytes: int = 256 * 2**20
    interpreter_max_bytes: int = 4 * 2**20
    max_shapes: int | None = None
    interpreter_max_shapes: int | None = 8

    def ranges_for(self, on_gpu: bool) -> dict[str, tuple]:
        return self.ranges if on_gpu else self.interpreter

    def max_bytes_for(self, on_gpu: bool) -> int:
        return self.max_bytes if on_gpu else self.interpreter_max_bytes

    def max_shapes_for(self, on_gpu: bool) -> int | None:
        return self.max_shapes if on_gpu else self.interpreter_max_shapes


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class Bucket:
    """A range of one dim (issue: kernel to model): shapes whose dims[dim] is in [lo, hi)."""

    name: str
    dim: str
    lo: int
    hi: int

    def contains(self, dims: dict[str, int]) -> bool:
        return self.dim in dims and self.lo <= dims[self.dim] < self.hi


@dataclass(frozen=True)
class Source:
    """task.toml `[source]`: the PyTorch function a task was made from (`warpsmith tasks new`). Its copy in
    reference.py is the task's source of truth: the prompt shows it, and kernel.py runs it as the
    incumbent (eager, or through torch.compile where that was faster)."""

    function: str                  # defined at module level in reference.py (and kernel.py)
    file: str = ""                 # where it was copied from, relative to the task folder
    sha256: str = ""               # of the copied text, to tell when the original has changed since
    incumbent: str = "eager"       # how kernel.py runs it: eager | torch.compile


SOURCE_INCUMBENTS = ("eager", "torch.compile")


@dataclass
class Task:
    name: str
    summary: str
    dsl: str
    entry: str
    dtypes: list[str]
    shapes: list[Shape]
    interpreter_shapes: list[Shape]
    tolerance: dict[str, Tolerance]
    root: Path
    rules: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    cuda_graphs: bool = True  # a task may opt out of the capture check, explicitly
    buckets: list[Bucket] = field(default_factory=list)
    default: str | None = None  # "module:function" users would run otherwise
    e2e: str | None = None  # file name of an end-to-end workload, relative to root
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    interpreter_call_timeout_s: float = DEFAULT_INTERPRETER_CALL_TIMEOUT_S
    heldout: HeldOut | None = None  # [heldout]: ranges of the shapes checked but never listed
    # [contract]: what a caller may pass and how an output is judged (harness.authoring.contract)
    contract: Contract = field(default_factory=Contract)
    source: Source | None = None  # [source]: the PyTorch function the task was made from
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def toml_path(self) -> Path:
        return self.root / "task.toml"

    @property
    def reference_path(self) -> Path:
        return self.root / "reference.py"

    @property
    def enforced_rules_packs(self) -> list[str]:
        """The rules packs every candidate is checked against whatever packs a session selects:
        the task's own and its DSL's, in that order, each once."""
        return list(dict.fromkeys([*self.rules, f"dsl-{self.dsl}"]))

    @property
    def baseline_path(self) -> Path:
        return self.root / "kernel.py"

    def call_timeout_for(self, on_gpu: bool) -> float:
        """The per-call limit in force on this device (before any `--timeout`)."""
        return self.call_timeout_s if on_gpu else self.interpreter_call_timeout_s

    def shapes_for(self, on_gpu: bool) -> list[Shape]:
        return self.shapes if on_gpu else self.interpreter_shapes

    def shape_names(self, text: str) -> list[str]:
        """A comma-separated --shapes value as names. Some names hold a comma themselves (the DSV4
        tasks' "short, partial window"): at each point the longest run of pieces that is a known name
        is taken, so `--shapes "short, partial window,long, split key axis"` means two shapes; a piece
        that starts no known name is kept as typed, for the caller's unknown-shape message."""
        known = {" ".join(x.strip() for x in s.name.split(",")): s.name for s in self.shapes + self.interpreter_shapes}
        pieces = [x.strip() for x in text.split(",")]
        out, i = [], 0
        while i < len(pieces):
            for j in range(len(pieces), i, -1):
                name = known.get(" ".join(pieces[i:j]))
                if name is not None:
                    out.append(name)
                    i = j
                    break
            else:
                if pieces[i]:
                    out.append(pieces[i])
                i += 1
        return out

    def load_reference(self) -> ModuleType:
        return load_module(self.reference_path, f"warpsmith_ref_{self.name}")

    def file_hashes(self) -> dict[str, str]:
        """sha256 of every file of the task folder (not caches): checked after each run."""
        out = {}
        for p in sorted(self.root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts:
                out[str(p.relative_to(self.root))] = hashlib.sha256(p.read_bytes()).hexdigest()
        return out


def load_module(path: Path, name: str, expect_sha256: str | None = None) -> ModuleType:
    """Import the Python file `path` as module `name`, compiling its bytes decoded as UTF-8 (no coding
    cookie, no BOM: harness.sourcefile says why). With `expect_sha256`, the bytes must hash to it
    (what the parent's static stage read), else nothing of the file runs: this check runs before
    any of the file's code, so the file can't have changed it."""
    data = Path(path).read_bytes()
    if expect_sha256 is not None and sourcefile.sha256(data) != expect_sha256:
        raise ImportError(f"{path}: its bytes are not the ones the static stage read (sha256 "
                          f"{sourcefile.sha256(data)[:16]}..., expected {expect_sha256[:16]}...): not imported")
    text = sourcefile.decode(data, path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python module")
    mod = importlib.util.module_from_spec(spec)
    # compile() of a str ignores a coding cookie: the code is exactly `text`. dont_inherit: this
    # file's `from __future__ import annotations` must not change how the module's code compiles.
    code = compile(text, str(path), "exec", dont_inherit=True)
    # Registered before exec: dataclasses and pickling look a module up in sys.modules by name.
    sys.modules[name] = mod
    try:
        exec(code, mod.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def kernel_dirs() -> list[Path]:
    """Where tasks are found, in order: the project's ./kernels, WARPSMITH_KERNELS, built-in."""
    dirs = [Path.cwd() / "kernels"]
    dirs += [Path(p) for p in os.environ.get("WARPSMITH_KERNELS", "").split(os.pathsep) if p]
    dirs.append(BUILTIN_KERNELS)
    seen, out = set(), []
    for d in dirs:
        r = d.resolve()
        if r not in seen:
            seen.add(r)
            out.append(d)
    return out


def find_task_dir(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if (p / "task.toml").is_file():
        return p
    if p.name == "task.toml" and p.is_file():
        return p.parent
    for d in kernel_dirs():
        if (d / str(name_or_path) / "task.toml").is_file():
            return d / str(name_or_path)
    if p.is_dir():
        raise TaskError(p, "", "not a task folder: no task.toml in it")
    if p.exists():
        raise TaskError(p, "", "not a task: give the folder that holds task.toml, or a task name")
    if len(p.parts) > 1 or str(name_or_path).startswith((".", "~")):
        raise TaskError(p, "", "no such task folder")
    known = ", ".join(sorted({t.name for d in kernel_dirs() if d.is_dir() for t in d.iterdir()
                              if (t / "task.toml").is_file()}))
    raise TaskError(name_or_path, "", f"no such task (known: {known or 'none'})")


def _shape_list(data: dict, key: str, path: Path, required: bool) -> list[Shape]:
    raw = data.get(key, [])
    if not isinstance(raw, list) or (required and not raw):
        raise TaskError(path, key, "needs at least one [[%s]] table" % key)
    shapes = []
    for i, s in enumerate(raw):
        where = f"{key}[{i}]"
        if not isinstance(s, dict):
            raise TaskError(path, where, "must be a table")
        name = s.get("name")
        if not isinstance(name, str) or not name:
            raise TaskError(path, f"{where}.name", "missing or not a string")
        dims = s.get("dims")
        if not isinstance(dims, dict) or not dims:
            raise TaskError(path, f"{where}.dims", f"shape {name!r} has no dims table")
        for k, v in dims.items():
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise TaskError(path, f"{where}.dims.{k}", f"must be a positive integer, got {v!r}")
        tags = s.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise TaskError(path, f"{where}.tags", "must be a list of strings")
        weight = s.get("weight", 1.0)
        if not isinstance(weight, (int, float)) or weight <= 0:
            raise TaskError(path, f"{where}.weight", "must be a positive number")
        protected = s.get("protected", "long" in tags)
        if not isinstance(protected, bool):
            raise TaskError(path, f"{where}.protected", "must be true or false")
        shapes.append(Shape(name, dict(dims), tuple(tags), float(weight), protected))
    names = [s.name for s in shapes]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise TaskError(path, key, f"duplicate shape names: {sorted(dup)}")
    return shapes


_HELDOUT_KEYS = ("max_bytes", "max_shapes", "interpreter")


def _heldout_ranges(raw: dict, where: str, path: Path, shapes: list[Shape]) -> dict[str, tuple]:
    """The dim ranges of one [heldout] table: `dim = [lo, hi]`, inclusive, positive integers or the
    name of another ranged dim whose bounds are numbers. Every ranged dim is a dim of every shape."""
    ranges: dict[str, tuple] = {}
    for dim, v in raw.items():
        if dim in _HELDOUT_KEYS:
            continue
        key = f"{where}.{dim}"
        if not (isinstance(v, list) and len(v) == 2
                and all(isinstance(b, str) or (isinstance(b, int) and not isinstance(b, bool) and b > 0) for b in v)):
            raise TaskError(path, key, f"must be [lo, hi]: positive integers, or another dim's name, got {v!r}")
        missing = [s.name for s in shapes if dim not in s.dims]
        if missing:
            raise TaskError(path, key, f"{dim!r} is not a dim of shape {missing[0]!r}")
        if all(isinstance(b, int) for b in v) and v[0] > v[1]:
            raise TaskError(path, key, f"lo {v[0]} is above hi {v[1]}")
        ranges[dim] = (v[0], v[1])
    for dim, bounds in ranges.items():
        for b in bounds:
            if isinstance(b, str) and (b == dim or b not in ranges or not all(isinstance(x, int) for x in ranges[b])):
                raise TaskError(path, f"{where}.{dim}", f"bound {b!r} must name another dim of this table "
                                                        "whose own bounds are numbers")
    return ranges


def _positive(raw: dict, key: str, where: str, path: Path) -> int | None:
    v = raw.get(key)
    if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v <= 0):
        raise TaskError(path, f"{where}.{key}", f"must be a positive integer, got {v!r}")
    return v


def _heldout(data: dict, path: Path, shapes: list[Shape], interp: list[Shape]) -> HeldOut | None:
    raw = data.get("heldout")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TaskError(path, "heldout", "must be a table of dim = [lo, hi] ranges")
    ranges = _heldout_ranges(raw, "heldout", path, shapes)
    sub = raw.get("interpreter")
    if sub is not None and not isinstance(sub, dict):
        raise TaskError(path, "heldout.interpreter", "must be a table of dim = [lo, hi] ranges")
    if sub is None:  # the GPU's ranges, capped at what the interpreter shapes already take
        top = {d: max(s.dims[d] for s in interp) for d in ranges if all(d in s.dims for s in interp)}
        iranges = {d: tuple(min(b, top[d]) if isinstance(b, int) else b for b in r) for d, r in ranges.items() if d in top}
    else:
        iranges = _heldout_ranges(sub, "heldout.interpreter", path, interp)
    kw: dict[str, Any] = {}  # the limits given; the rest keep HeldOut's defaults
    for key in ("max_bytes", "max_shapes"):
        if (v := _positive(raw, key, "heldout", path)) is not None:
            kw[key] = v
        if (v := _positive(sub or {}, key, "heldout.interpreter", path)) is not None:
            kw[f"interpreter_{key}"] = v
    return HeldOut(ranges, iranges, **kw)


_SHAPE_TABLE = Table({"name": None, "dims": None, "tags": None, "weight": None, "protected": None})


def task_schema(data: dict) -> Table:
    """Every key a task.toml may have (README "Writing a task"). [heldout]'s keys are the shapes' dims
    and its limits; [contract.inputs] names reference()'s arguments, which contract.parse checks."""
    dims = {d: None for key in ("shapes", "interpreter_shapes") for s in (data.get(key) or [])
            if isinstance(s, dict) and isinstance(s.get("dims"), dict) for d in s["dims"]}
    limits = {k: None for k in _HELDOUT_KEYS if k != "interpreter"}
    top = {k: None for k in ("name", "summary", "dsl", "entry", "dtypes", "rules", "models", "default", "e2e",
                             "variants", "cuda_graphs", "call_timeout_s", "interpreter_call_timeout_s")}
    return Table({
        **top,
        "shapes": Array(_SHAPE_TABLE), "interpreter_shapes": Array(_SHAPE_TABLE),
        "tolerance": OpenTable(Table({"atol": None, "rtol": None}), DTYPES, "dtype"),
        "buckets": Array(Table({"name": None, "dim": None, "lo": None, "hi": None})),
        "heldout": Table({**dims, **limits, "interpreter": Table({**dims, **limits})}),
        "contract": Table({**{k: None for k in CONTRACT_KEYS},
                           "invariants": OpenTable(None, tuple(INVARIANTS), "invariant"),
                           "inputs": OpenTable(Table({k: None for k in CONTRACT_INPUT_KEYS}))}),
        "source": Table({"function": None, "file": None, "sha256": None, "incumbent": None}),
    })


def unknown_key_errors(path: Path, text: str, data: dict) -> list[TaskError]:
    """One error per key or table of task.toml the loader doesn't read (a misspelt `[[shape]]` would
    otherwise be ignored, and its shape never timed), each with its line and the likely intended key."""
    return [TaskError(path, u.label(), u.problem(), line_of(text, u.path)) for u in unknown_keys(data, task_schema(data))]


def _source(data: dict, path: Path, text: str, root: Path) -> Source | None:
    raw = data.get("source")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise TaskError(path, "source", "must be a table", line_of(text, ("source",)))
    for key in ("function", "file", "sha256", "incumbent"):
        if key in raw and not isinstance(raw[key], str):
            raise TaskError(path, f"source.{key}", "must be a string", line_of(text, ("source", key)))
    fn = raw.get("function", "")
    if not fn.isidentifier():
        raise TaskError(path, "source.function", f"{fn!r}: must name a function of reference.py",
                        line_of(text, ("source", "function")))
    inc = raw.get("incumbent", "eager")
    if inc not in SOURCE_INCUMBENTS:
        raise TaskError(path, "source.incumbent", f"{inc!r}: one of {', '.join(SOURCE_INCUMBENTS)}",
                        line_of(text, ("source", "incumbent")))
    ref = root / "reference.py"
    try:
        tree = ast.parse(ref.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        tree = None  # (reference.py's own problem is reported when it is imported)
    if tree is not None and not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn
                                    for n in tree.body):
        raise TaskError(path, "source.function", f"reference.py has no module-level `def {fn}(...)`",
                        line_of(text, ("source", "function")))
    return Source(fn, raw.get("file", ""), raw.get("sha256", ""), inc)


def _str(data: dict, key: str, path: Path, default: str | None = None) -> str:
    v = data.get(key, default)
    if not isinstance(v, str) or not v:
        raise TaskError(path, key, "missing or not a string")
    return v


def check_baseline_defines_entry(kernel: Path, entry: str) -> None:
    """kernel.py parses and has a module-level `def <entry>`, read with ast (never imported): a
    baseline without the entry fails every candidate derived from it, so the task is refused."""
    try:
        tree = ast.parse(kernel.read_text(encoding="utf-8"), filename=str(kernel))
    except SyntaxError as e:
        raise TaskError(kernel, "", f"not valid Python at line {e.lineno}: {e.msg}") from None
    except ValueError as e:  # null bytes (3.11), undecodable bytes
        raise TaskError(kernel, "", f"not valid Python ({e})") from None
    except OSError as e:
        raise TaskError(kernel, "", f"unreadable ({e})") from None
    if not any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entry for n in tree.body):
        raise TaskError(kernel, entry, f"no module-level `def {entry}(...)`, the entry task.toml names; "
                                       "rename the function or fix `entry`")


def load_task(name_or_path: str | Path, check_null: bool = True, reference: bool = True) -> Task:
    """`reference=False`: task.toml and the files' presence only, without importing reference.py (it
    imports torch: seconds), for what reads no more (`tasks list`, `check`); the contract stays empty."""
    root = find_task_dir(name_or_path)
    path = root / "task.toml"
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TaskError(path, "", f"bad TOML: {e}") from None
    unknown = unknown_key_errors(path, text, data)
    if unknown:
        raise unknown[0]
    name = _str(data, "name", path)
    dsl = _str(data, "dsl", path)
    if dsl not in DSLS:
        raise TaskError(path, "dsl", f"unknown DSL {dsl!r} (one of {', '.join(DSLS)})")
    entry = _str(data, "entry", path)
    if not entry.isidentifier():
        raise TaskError(path, "entry", f"{entry!r} is not a Python identifier")
    dtypes = data.get("dtypes", ["bfloat16"])
    if not isinstance(dtypes, list) or not dtypes or any(d not in DTYPES for d in dtypes):
        raise TaskError(path, "dtypes", f"must be a non-empty list drawn from {DTYPES}")
    shapes = _shape_list(data, "shapes", path, required=True)
    interp = _shape_list(data, "interpreter_shapes", path, required=True)
    if any(s.long for s in shapes) and not any(s.long for s in interp):
        raise TaskError(path, "interpreter_shapes", "the task has long shapes; tag one interpreter shape 'long' too")
    tol_raw = data.get("tolerance", {})
    tolerance = {}
    for dt in dtypes:
        t = tol_raw.get(dt) if isinstance(tol_raw, dict) else None
        if not isinstance(t, dict):
            raise TaskError(path, f"tolerance.{dt}", "missing: every dtype needs atol and rtol")
        try:
            tolerance[dt] = Tolerance(float(t["atol"]), float(t["rtol"]))
        except (KeyError, TypeError, ValueError):
            raise TaskError(path, f"tolerance.{dt}", "needs numeric atol and rtol") from None
    buckets = []
    for i, b in enumerate(data.get("buckets", [])):
        try:
            buckets.append(Bucket(str(b["name"]), str(b["dim"]), int(b.get("lo", 0)), int(b.get("hi", 2**62))))
        except (KeyError, TypeError, ValueError):
            raise TaskError(path, f"buckets[{i}]", "needs name, dim and integer lo/hi") from None
    limits = {}
    for key, default in (("call_timeout_s", DEFAULT_CALL_TIMEOUT_S),
                         ("interpreter_call_timeout_s", DEFAULT_INTERPRETER_CALL_TIMEOUT_S)):
        val = data.get(key, default)
        if isinstance(val, bool) or not isinstance(val, (int, float)) or not 0 < val <= 86400:
            raise TaskError(path, key, f"{val!r}: must be a number of seconds above 0 (at most 86400)")
        limits[key] = float(val)
    for fname in ("reference.py", "kernel.py"):
        if not (root / fname).is_file():
            raise TaskError(root / fname, "", "missing (every task needs reference.py and kernel.py)")
    check_baseline_defines_entry(root / "kernel.py", entry)
    heldout = _heldout(data, path, shapes, interp)
    source = _source(data, path, text, root)
    task = Task(
        name=name, summary=str(data.get("summary", "")), dsl=dsl, entry=entry, dtypes=list(dtypes),
        shapes=shapes, interpreter_shapes=interp, tolerance=tolerance, root=root,
        rules=list(data.get("rules", [])), models=list(data.get("models", [])),
        cuda_graphs=bool(data.get("cuda_graphs", True)), buckets=buckets,
        default=data.get("default"), e2e=data.get("e2e"), heldout=heldout, source=source, raw=data, **limits,
    )
    if not reference:
        return task
    try:
        ref = task.load_reference()
    except Exception as e:  # a task author's bug: say where
        raise TaskError(task.reference_path, "", f"import failed: {type(e).__name__}: {e}") from None
    for fn in ("make_inputs", "reference"):
        if not callable(getattr(ref, fn, None)):
            raise TaskError(task.reference_path, fn, "must define this function")
    cases = hard_cases(ref)
    if cases is None:
        raise TaskError(task.reference_path, "HARD_CASES", "must be a dict of case name -> what it tests")
    task.contract = _contract(data, path, ref, text)
    if check_null:
        check_null_outputs_fail(task, ref)
        check_hard_cases(task, ref)
        check_contract(task, ref)
        check_fill(task, ref)
    return task


def _contract(data: dict, path: Path, ref: ModuleType, text: str = "") -> Contract:
    """task.toml's [contract], read against reference()'s parameter names (an entry for an argument
    reference() doesn't have names its line and the closest argument)."""
    params = reference_params(ref.reference)
    raw = data.get("contract")
    if params is None:
        if raw is not None:
            raise TaskError(path, "contract", "reference() takes *args: name its parameters, so the contract can "
                                              "name each input")
        return Contract()
    for name in (raw or {}).get("inputs") or {} if isinstance(raw, dict) else ():
        if name not in params:
            near = closest(name, params)
            raise TaskError(path, f"contract.inputs.{name}", f"reference() has no argument {name!r} ("
                            + (f"did you mean {near}?" if near else f"its arguments: {', '.join(params)}") + ")",
                            line_of(text, ("contract", "inputs", name)))
    try:
        contract = parse_contract(raw, params)
    except ContractError as e:
        raise TaskError(path, e.key, e.problem) from None
    if contract.error == "rows" and callable(getattr(ref, "compare", None)):
        raise TaskError(path, "contract.error", "\"rows\" needs the harness's comparison, and reference.py "
                                                "defines its own compare")
    return contract


def check_contract(task: Task, ref_mod: ModuleType | None = None) -> None:
    """Refuse a contract the reference's inputs contradict (a dtype, a layout or a mask they can't
    take; harness.authoring.contract.check_against_inputs), and a contract case no kernel could pass: its
    reference output has NaN or Inf on an interpreter shape."""
    import torch  # ~1 s: only when a task is checked (as check_hard_cases)

    ref_mod = ref_mod or task.load_reference()
    dt = getattr(torch, task.dtypes[0])
    for shape in task.interpreter_shapes:
        xs = ref_mod.make_inputs(shape.dims, dt, 0, "cpu")
        xs = list(xs) if isinstance(xs, (tuple, list)) else [xs]
        problem = check_against_inputs(task.contract, xs, task.dtypes[0]) if task.contract.declared else None
        if problem:
            key, _, what = problem.partition(": ")
            raise TaskError(task.toml_path, key, f"{what} (shape {shape.name!r})")
        for case in task.contract.cases():
            try:
                made = apply_contract(xs, case, 0)
                out = ref_mod.reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in made])
            except Exception as e:  # a task author's contract the reference can't take: say which
                raise TaskError(task.toml_path, f"contract.inputs.{case['name']}",
                                f"{describe_case(case)}: the reference failed on {shape.name!r}: "
                                f"{type(e).__name__}: {e}") from None
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if any(isinstance(o, torch.Tensor) and o.is_floating_point() and not torch.isfinite(o).all() for o in outs):
                raise TaskError(task.toml_path, f"contract.inputs.{case['name']}",
                                f"{describe_case(case)}: the reference's output has NaN/Inf on {shape.name!r}: no "
                                "kernel could pass it")


def check_fill(task: Task, ref_mod: ModuleType) -> None:
    """Refuse a fill_inputs(xs, dims, seed) that writes other values than make_inputs makes for that
    seed (the child refills timed batches with it, the parent rebuilds a checked call with make_inputs:
    a mismatch would fail every timed output, the incumbent's too). The arguments a task names in
    FILL_READS_ONLY are refilled only where reference() reads them: reference() of the refilled set
    (which held another seed's values) must equal reference() of make_inputs bit for bit. (Not a
    poison of NaNs: the reference gathers row 0 for a -1 index and weighs it by 0, and a NaN times 0
    is a NaN; what a fill leaves is always some earlier set's finite values.)"""
    import torch  # ~1 s: not at --help's start (as above)

    fill = getattr(ref_mod, "fill_inputs", None)
    if fill is None:
        return
    partial = fill_reads_only(ref_mod)
    if partial is None:
        raise TaskError(task.reference_path, "FILL_READS_ONLY", "must be a tuple of argument positions")
    dt = getattr(torch, task.dtypes[0])
    for shape in task.interpreter_shapes:
        try:
            xs = ref_mod.make_inputs(shape.dims, dt, 1, "cpu")
            xs = list(xs) if isinstance(xs, (tuple, list)) else [xs]
            filled = fill(xs, shape.dims, 2)
            want = ref_mod.make_inputs(shape.dims, dt, 2, "cpu")
            want = list(want) if isinstance(want, (tuple, list)) else [want]
            same = not filled or filled_as_made(ref_mod, xs, want)
        except Exception as e:  # a task author's bug: say where
            raise TaskError(task.reference_path, "fill_inputs", f"failed on {shape.name!r}: {type(e).__name__}: {e}") from None
        if not same:
            raise TaskError(task.reference_path, "fill_inputs",
                            f"wrote other values than make_inputs makes for the same seed on {shape.name!r}")


def fill_reads_only(ref_mod: ModuleType) -> tuple[int, ...] | None:
    """reference.py's FILL_READS_ONLY: the argument positions its fill_inputs refreshes only where
    reference() reads them (a cache of which a call reads the rows its indices name); () when none,
    None if malformed."""
    got = getattr(ref_mod, "FILL_READS_ONLY", ())
    if not isinstance(got, tuple) or not all(isinstance(i, int) and not isinstance(i, bool) for i in got):
        return None
    return got


def filled_as_made(ref_mod: ModuleType, xs: list, want: list) -> bool:
    """A refilled input set agrees with make_inputs's for the same seed: bit for bit, except the
    FILL_READS_ONLY arguments, where reference() must give the same output bit for bit (it reads
    them exactly where a kernel must)."""
    import torch  # ~1 s: only when a task with fill_inputs loads (as check_fill above)

    partial = fill_reads_only(ref_mod) or ()

    def eq(a: object, b: object) -> bool:
        return torch.equal(a, b) and a.dtype == b.dtype if isinstance(a, torch.Tensor) else type(a) is type(b) and a == b

    if len(xs) != len(want) or not all(eq(a, b) for i, (a, b) in enumerate(zip(xs, want)) if i not in partial):
        return False
    if not partial:
        return True
    got, exp = ref_mod.reference(*xs), ref_mod.reference(*want)
    return eq(got, exp)


def hard_cases(ref_mod: ModuleType) -> dict[str, str] | None:
    """reference.py's HARD_CASES ({name: what it tests}; {} when it declares none), None if malformed.

    The hook: the harness calls make_inputs(dims, dtype, seed, device) with dims["case"] set to a
    case's name; make_inputs builds that case's inputs (values ~1e4, -inf masks, the positions and
    sinks a model really has...). Every candidate is checked on every case (correctness only)."""
    cases = getattr(ref_mod, "HARD_CASES", {})
    if not isinstance(cases, dict) or not all(isinstance(k, str) and k and isinstance(v, str) for k, v in cases.items()):
        return None
    return dict(cases)


def check_hard_cases(task: Task, ref_mod: ModuleType | None = None) -> None:
    """Refuse a hard case no kernel could pass: its reference output has NaN or Inf on an
    interpreter shape (e.g. a softmax row masked entirely), or building it fails."""
    import torch  # ~1 s: only when a task is checked or compared; `warpsmith --help` loads this module

    ref_mod = ref_mod or task.load_reference()
    for case in hard_cases(ref_mod) or {}:
        for shape in task.interpreter_shapes:
            try:
                inputs = ref_mod.make_inputs({**shape.dims, "case": case}, getattr(torch, task.dtypes[0]), 0, "cpu")
                inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)
                out = ref_mod.reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
            except Exception as e:  # a task author's bug: say which case
                raise TaskError(task.reference_path, f"HARD_CASES[{case!r}]",
                                f"building it on {shape.name!r} failed: {type(e).__name__}: {e}") from None
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if any(isinstance(o, torch.Tensor) and o.is_floating_point() and not torch.isfinite(o).all() for o in outs):
                raise TaskError(task.reference_path, f"HARD_CASES[{case!r}]",
                                f"the reference's output has NaN/Inf on {shape.name!r}: no kernel could pass it")


def compare(task: Task, ref_mod: ModuleType, out: Any, expected: Any, inputs: tuple, dtype: str) -> str | None:
    """None if `out` matches `expected` within the task's tolerance, else a short reason.

    A reference module may define `compare(out, expected, inputs, atol, rtol) -> str | None`
    for outputs where elementwise closeness is the wrong test (e.g. top-k indices). Otherwise every
    element within atol + rtol x |expected|, and what the task's [contract] adds: with error "rows"
    each row's L1 error within row_rtol of the row's L1 norm (an elementwise tolerance is blind to a
    row of 20000 probabilities below atol, all dropped), and its invariants (rows summing to 1).
    Rows are along the last dim, so a sample of whole rows (a timed output's) is judged the same.
    """
    import torch  # ~1 s: not at --help's start (as above)

    tol = task.tolerance[dtype]
    custom = getattr(ref_mod, "compare", None)
    if callable(custom):
        return custom(out, expected, inputs, tol.atol, tol.rtol)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    exps = expected if isinstance(expected, (tuple, list)) else (expected,)
    if len(outs) != len(exps):
        return f"returned {len(outs)} outputs, expected {len(exps)}"
    for i, (o, e) in enumerate(zip(outs, exps)):
        if not isinstance(o, torch.Tensor):
            return f"output {i} is {type(o).__name__}, not a torch.Tensor"
        if o.shape != e.shape:
            return f"output {i} has shape {tuple(o.shape)}, expected {tuple(e.shape)}"
        if o.dtype != e.dtype:
            return f"output {i} has dtype {o.dtype}, expected {e.dtype}"
        # Compared where the expected output lives (the GPU on a GPU box): fast, and exact either way.
        ef = e.detach().float()
        of = o.detach().to(ef.device).float()
        if not torch.isfinite(of).all():
            return f"output {i} has {int((~torch.isfinite(of)).sum())} NaN/Inf values"
        bad = (of - ef).abs() > (tol.atol + tol.rtol * ef.abs())
        if bad.any():
            idx = tuple(int(j) for j in bad.nonzero()[0])
            return (f"output {i}: {int(bad.sum())} of {bad.numel()} elements off; first at {idx}: "
                    f"got {of[idx].item():.6g}, expected {ef[idx].item():.6g} (atol {tol.atol}, rtol {tol.rtol})")
        # Judged at the output's own scale too, where the contract says so (harness.authoring.contract).
        contract = task.contract
        if contract.error == "rows" and ef.is_floating_point():
            err = row_errors(of, ef, tol.atol, contract.row_rtol or tol.rtol)
            if err:
                return f"output {i}: {err}"
        for name, inv_tol in contract.invariants.items():
            err = INVARIANTS[name][1](of, inv_tol)
            if err:
                return f"output {i}: {name}: {err}"
    return None


def _null_outputs(expected, inputs):
    """Outputs that do no work: each must fail the tolerance, or the task rewards doing nothing."""
    import torch  # ~1 s: not at --help's start (as above)

    multi = isinstance(expected, (tuple, list))
    exps = list(expected) if multi else [expected]

    def pack(xs):
        return type(expected)(xs) if multi else xs[0]

    yield "zeros", pack([torch.zeros_like(e) for e in exps])
    yield "a constant", pack([torch.full_like(e, e.float().mean().item() if e.is_floating_point() else 0)
                              for e in exps])
    if not multi:
        for x in inputs:
            if isinstance(x, torch.Tensor) and x.shape == expected.shape and x.dtype == expected.dtype:
                yield "a copy of the input", x.clone()
                break


def check_null_outputs_fail(task: Task, ref_mod: ModuleType | None = None) -> None:
    """Refuse a task whose tolerance lets a null output pass on every interpreter shape."""
    import torch  # ~1 s: not at --help's start (as above)

    ref_mod = ref_mod or task.load_reference()
    passes: dict[str, int] = {}
    for shape in task.interpreter_shapes:
        inputs = ref_mod.make_inputs(shape.dims, getattr(torch, task.dtypes[0]), 0, "cpu")
        expected = ref_mod.reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        for label, null in _null_outputs(expected, inputs):
            if compare(task, ref_mod, null, expected, inputs, task.dtypes[0]) is None:
                passes[label] = passes.get(label, 0) + 1
    n = len(task.interpreter_shapes)
    loose = [label for label, k in passes.items() if k == n]
    if loose:
        raise TaskError(task.toml_path, f"tolerance.{task.dtypes[0]}",
                        f"too loose: {' and '.join(loose)} {'pass' if len(loose) > 1 else 'passes'} on every interpreter "
                        "shape; tighten atol/rtol")


def list_tasks() -> tuple[list[Task], list[TaskError]]:
    tasks, errors, seen = [], [], set()
    for d in kernel_dirs():
        if not d.is_dir():
            continue
        for sub in sorted(d.iterdir()):
            if not (sub / "task.toml").is_file() or sub.name in seen:
                continue
            seen.add(sub.name)
            try:
                tasks.append(load_task(sub, check_null=False, reference=False))  # listing: no torch
            except TaskError as e:
                errors.append(e)
    return tasks, errors

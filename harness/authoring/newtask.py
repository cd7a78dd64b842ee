"""`warpsmith tasks new NAME --from FILE.py:FUNC`: a task folder made from a PyTorch function a person has.

What it reads:
- FUNC, a module-level function of FILE.py. Its source, with what it uses from FILE.py (imports,
  helpers, constants; found with ast, transitively), is COPIED into reference.py and kernel.py: the
  task must stand alone (the sandboxed child is given kernel.py alone, and a reference that changed
  whenever FILE.py is edited would move the goal under every kept kernel). task.toml `[source]`
  records where it came from and the copy's sha256; `tasks validate` warns when FILE.py's FUNC has
  changed since. The copy is proved faithful before anything is written: it is run on the example
  and must return FUNC's output bit for bit.
- Example inputs: FILE.py's `example_inputs()`, or `--example EXPR` (evaluated in FILE.py's namespace).
  Their tensors give the dtypes, the ranks and how values are drawn (randn at the example's mean and
  std, uniform in its range where it is never negative, integers in their range or below the dim they
  index); other values (an eps, a flag) are constants of the task. The dims: `example_inputs`'s integer keyword parameters
  (`def example_inputs(tokens=4096, hidden=8192)`), each axis mapped to the dim that moves it (probed
  on the meta device, nothing allocated); without them, axes of equal size share one dim, named after
  the first argument and axis that has it (`x_1`).
- `--shapes "name:dim=v,dim=v;..."`: the GPU shapes (dims not given keep the example's values); else one
  shape, the example's.

What it derives: interpreter shapes (the first GPU shape halved until the largest input has at most
INTERP_ELEMENTS elements, and the same with each dim made a prime below it, kept where FUNC runs on
them), tolerances per dtype (atol no larger than a tenth of the output's typical magnitude), the input
contract (views of every 2-D+ tensor: a PyTorch function takes any strides), `[heldout]` ranges where
FUNC runs with every dim odd and with each at 1 (held-out draws combine them), and bytes_moved (inputs
and outputs, each once: the roofline's floor; outputs' axes matched to dims over probes that vary one
dim at a time).

The incumbent (kernel.py) is FUNC itself: eager, or through torch.compile where that is faster on the
GPU (measured here when there is one: CUDA-graph replays of each, the median per call, as the timing
stage replays batches). The harness times it as any incumbent, in a process of its own; it is never
checked statically (the incumbent never is): candidates must be kernels of the task's DSL, and the
first correct one faster than FUNC is a keep.
"""
from __future__ import annotations

import ast
import builtins
import hashlib
import importlib.util
import inspect
import math
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from harness.invocation import command as warpsmith_command
from harness.authoring.tasks import DSLS, DTYPES, TaskError, check_baseline_defines_entry, load_module, load_task
from harness.authoring.tomlkeys import closest

INTERP_ELEMENTS = 4096  # the largest input of an interpreter shape: Triton's interpreter runs ~1000x slower
# Tolerances by dtype before the output's own scale tightens atol: a kernel computing in fp32 and
# rounding once differs from eager PyTorch by about one ulp of the dtype (bf16: 2^-8, fp16: 2^-11).
TOLERANCES = {"bfloat16": (1e-2, 2e-2), "float16": (1e-3, 2e-3), "float32": (1e-5, 1e-4)}
RULES = ("reward-hacks", "cuda-graphs", "long-context")
GENERATED = ("make_inputs", "reference", "bytes_moved", "HARD_CASES", "_INPUTS", "_OUTPUTS", "_draw")


class NewTaskError(Exception):
    """What stops a task from being made: one line naming the file (and line) or the option."""


@dataclass
class Arg:
    name: str
    value: Any                       # the example's value
    axes: tuple = ()                 # a dim's name or a fixed size per axis (tensors)
    dtype: str = "task"              # "task" or a torch dtype name (tensors)

    @property
    def tensor(self) -> bool:
        import torch  # ~1 s: a command module imports this one at `--help`

        return isinstance(self.value, torch.Tensor)


@dataclass
class Made:
    """What `create` wrote and decided, for the command to say."""
    root: Path
    entry: str
    dims: dict[str, int]
    dims_how: str
    shapes: list[tuple[str, dict]]
    interpreter: list[tuple[str, dict]]
    dropped: list[str]
    heldout: dict[str, list[int]]
    incumbent: str
    incumbent_why: str
    tolerance: dict[str, tuple[float, float]]
    notes: list[str] = field(default_factory=list)
    variants: list[str] = field(default_factory=list)


# -- FUNC and what it uses ------------------------------------------------------------------------

def parse_from(spec: str) -> tuple[Path, str]:
    path, sep, func = spec.rpartition(":")
    if not sep or not path or not func.isidentifier():
        raise NewTaskError(f"--from {spec!r}: give FILE.py:FUNC (a module-level function of FILE.py)")
    p = Path(path)
    if not p.is_file():
        raise NewTaskError(f"{p}: no such file (--from {spec})")
    return p, func


def load_user_module(path: Path) -> ModuleType:
    """FILE.py imported as the person's own code (it is theirs, not a candidate's). Its folder must be on
    sys.path for its own imports while it is used (create() puts it there)."""
    spec = importlib.util.spec_from_file_location(f"warpsmith_user_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise NewTaskError(f"{path}: not a Python file")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception as e:  # the person's file: say where it broke
        raise NewTaskError(f"{path}: importing it failed: {type(e).__name__}: {e}") from None
    return mod


def _bound_by(stmt: ast.stmt) -> set[str]:
    """The module-level names a top-level statement binds (nested functions' own names not included)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    out: set[str] = set()
    stack: list[ast.AST] = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name.split(".")[0]) for a in n.names if a.name != "*"}
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            continue
        stack.extend(ast.iter_child_nodes(n))
    return out


def _is_main_block(stmt: ast.stmt) -> bool:
    """`if __name__ == "__main__":`"""
    t = getattr(stmt, "test", None)
    return (isinstance(stmt, ast.If) and isinstance(t, ast.Compare) and isinstance(t.left, ast.Name)
            and t.left.id == "__name__")


def _used_by(stmt: ast.stmt) -> set[str]:
    """Names a statement reads that it doesn't bind itself (a function's parameters and locals aside)."""
    used = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    local: set[str] = set()
    for n in ast.walk(stmt):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = n.args
            local |= {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs}
            local |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        elif isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            local.add(n.id)
    top = {stmt.name} if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else set()
    return used - (local - top) - top


def _segment(text: str, stmt: ast.stmt) -> str:
    """A top-level statement's source lines, decorators and all."""
    lines = text.splitlines()
    first = min([stmt.lineno] + [d.lineno for d in getattr(stmt, "decorator_list", [])])
    return "\n".join(lines[first - 1:stmt.end_lineno])


def function_segment(text: str, name: str) -> str | None:
    """The source of module-level `def name` in `text` (decorators included), or None."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            return _segment(text, stmt)
    return None


def sha256_of(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def copy_of(path: Path, func: str) -> tuple[str, str, int]:
    """(FUNC with what it uses from FILE.py, in file order; FUNC's own source; its line)."""
    text = path.read_text(encoding="utf-8")
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError as e:
        raise NewTaskError(f"{path}:{e.lineno}: not valid Python: {e.msg}") from None
    body = tree.body
    target = next((i for i, s in enumerate(body) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                   and s.name == func), None)
    if target is None:
        defined = [s.name for s in body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        near = closest(func, defined)
        raise NewTaskError(f"{path}: no module-level `def {func}(...)`"
                           + (f" (did you mean {near}?)" if near else f" (its functions: {', '.join(defined) or 'none'})"))
    binders: dict[str, list[int]] = {}
    for i, s in enumerate(body):
        if _is_main_block(s):  # what runs as a script never runs on import: not the function's
            continue
        for name in _bound_by(s):
            binders.setdefault(name, []).append(i)
    stars = [i for i, s in enumerate(body) if isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names)]
    futures = [i for i, s in enumerate(body) if isinstance(s, ast.ImportFrom) and s.module == "__future__"]
    chosen, todo = set(futures), [target]
    while todo:
        i = todo.pop()
        if i in chosen:
            continue
        chosen.add(i)
        for name in sorted(_used_by(body[i])):
            if name in binders:
                # Every statement that binds it could be the one in force when FUNC runs: all of them.
                todo += [j for j in binders[name] if j not in chosen]
            elif not hasattr(builtins, name) and name not in ("__file__", "__name__"):
                if not stars:
                    who = getattr(body[i], "name", "this statement")
                    raise NewTaskError(f"{path}:{body[i].lineno}: {who} uses {name!r}, which {path.name} doesn't "
                                       f"define at module level: the task's copy of {func} could not run it")
                todo += [j for j in stars if j not in chosen]  # (what a star import gives can't be told apart)
    for i in sorted(chosen):
        for node in ast.walk(body[i]):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and not (isinstance(node, ast.ImportFrom) and node.level == 0
                                                                       and node.module == "__future__"):
                _check_importable(node, path)
    copied = "\n\n\n".join(_segment(text, body[i]) for i in sorted(chosen))
    return copied, _segment(text, body[target]), body[target].lineno


def _check_importable(node: ast.stmt, path: Path) -> None:
    """An import the copy makes must work without FILE.py's folder on sys.path: the task runs elsewhere
    (the harness's parent process and the sandboxed child don't have that folder on theirs)."""
    if isinstance(node, ast.ImportFrom) and node.level:
        raise NewTaskError(f"{path}:{node.lineno}: a relative import: the task's copy of the function can't "
                           "make it; import the package absolutely (installed), or copy what it gives into the file")
    mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    for mod in mods:
        top = mod.split(".")[0]
        if top and not _importable_elsewhere(top, path.resolve().parent):
            raise NewTaskError(f"{path}:{node.lineno}: the function uses `{top}`, which imports only from beside "
                               f"{path.name} (or not at all): the task carries a copy of one file's code, so install "
                               "that module (pip install -e) or copy what it gives into the file")


def _importable_elsewhere(top: str, folder: Path) -> bool:
    """`import top` finds it through a sys.path entry other than `folder` and the current folder."""
    if top in sys.builtin_module_names:
        return True
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return False
    if spec is None:
        return False
    if spec.origin in ("built-in", "frozen"):
        return True
    if spec.submodule_search_locations:  # a package: the folder that holds its folder
        homes = [Path(p).resolve().parent for p in spec.submodule_search_locations]
    elif spec.origin:
        homes = [Path(spec.origin).resolve().parent]
    else:
        return False
    skip = {folder, Path.cwd().resolve()}
    entries = {Path(p).resolve() for p in sys.path if p} - skip
    return any(h in entries for h in homes)


# -- the example -----------------------------------------------------------------------------------

def _dims_of_example(fn: Callable) -> dict[str, int]:
    sig = inspect.signature(fn)
    dims = {}
    for p in sig.parameters.values():
        if p.default is inspect.Parameter.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise NewTaskError(f"example_inputs() has a parameter {p.name!r} without a default: every parameter "
                               "needs one (an int default is a dim: `def example_inputs(rows=4096, cols=1024)`)")
        if isinstance(p.default, int) and not isinstance(p.default, bool) and p.default > 0:
            dims[p.name] = p.default
    return dims


def _as_args(value: Any, where: str) -> tuple:
    if isinstance(value, tuple):
        return value
    if isinstance(value, list):
        return tuple(value)
    import torch  # (a command module imports this one at `--help`: torch only when a task is made)

    if isinstance(value, torch.Tensor):
        return (value,)
    raise NewTaskError(f"{where} returned {type(value).__name__}: give a tuple of FUNC's positional arguments")


def _example_at(maker: Callable, dims: dict) -> tuple:
    """example_inputs(**dims) on the meta device (shapes, nothing allocated); made for real where an
    op has no meta version."""
    import torch  # (as above)

    try:
        with torch.device("meta"):
            return _as_args(maker(**dims), "example_inputs()")
    except NewTaskError:
        raise
    except Exception:  # an op meta can't make: for real
        pass
    try:
        return _as_args(maker(**dims), "example_inputs()")
    except NewTaskError:
        raise
    except Exception as e:  # the person's function: say where
        raise NewTaskError(f"example_inputs({_dims_inline(dims)[2:-2]}) failed: {type(e).__name__}: {e}") from None


def _axes_by_probing(maker: Callable, dims: dict, names: list[str]) -> list[tuple]:
    """Each tensor argument's axes as dim names (or fixed sizes): the one dim whose doubling doubles it."""
    import torch  # (as above)

    def shapes(d: dict) -> list[tuple | None]:
        return [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in _example_at(maker, d)]

    base = shapes(dims)
    moved = {d: shapes({**dims, d: 2 * dims[d]}) for d in dims}
    out = []
    for i, shape in enumerate(base):
        if shape is None:
            out.append(())
            continue
        axes: list = []
        for a, size in enumerate(shape):
            after = {d: (moved[d][i][a] if moved[d][i] is not None and len(moved[d][i]) == len(shape) else None)
                     for d in dims}
            movers = [d for d in dims if after[d] != size]
            if not movers:
                axes.append(size)
            elif len(movers) == 1 and size == dims[movers[0]] and after[movers[0]] == 2 * size:
                axes.append(movers[0])
            else:
                raise NewTaskError(f"example_inputs(): axis {a} of {names[i]!r} ({size}) follows "
                                   f"{' and '.join(movers)} without being one of them: give it a keyword "
                                   "parameter of its own")
        out.append(tuple(axes))
    return out


def _axes_by_size(args: list[Arg], notes: list[str]) -> dict[str, int]:
    """Axes of equal size share a dim named after the first argument and axis of that size; size 1 is fixed."""
    by_size: dict[int, str] = {}
    dims: dict[str, int] = {}
    for arg in args:
        if not arg.tensor:
            continue
        axes = []
        for a, size in enumerate(arg.value.shape):
            if size == 1:
                axes.append(1)
                continue
            if size not in by_size:
                by_size[size] = f"{arg.name}_{a}"
                dims[by_size[size]] = size
            axes.append(by_size[size])
        if len(set(x for x in axes if isinstance(x, str))) < len([x for x in axes if isinstance(x, str)]):
            notes.append(f"{arg.name} has two axes of one size, taken as one dim: where they vary apart, give the "
                         "example distinct sizes, or dims as keyword parameters of example_inputs()")
        arg.axes = tuple(axes)
    return dims


def _constant_source(value: Any, name: str) -> str:
    import torch  # (as above)

    text = repr(value)
    try:
        same = eval(text, {"torch": torch, "inf": math.inf, "nan": math.nan}) == value  # noqa: S307 - our own repr
    except Exception:  # a value whose repr doesn't evaluate back to it
        same = False
    if not same:
        raise NewTaskError(f"argument {name!r} of the example is a {type(value).__name__} that can't be written into "
                           "reference.py as a constant: make it a tensor, or a number, string or tuple")
    return text


# -- shapes --------------------------------------------------------------------------------------

def parse_shapes(text: str, dims: dict[str, int], flag: str = "--shapes") -> list[tuple[str, dict]]:
    """`name:dim=v,dim=v;name:...` as (name, dims) with every dim: those not given keep `dims`'s value."""
    out: list[tuple[str, dict]] = []
    for part in [p.strip() for p in text.split(";") if p.strip()]:
        name, sep, rest = part.partition(":")
        name = name.strip()
        if not sep or not name:
            raise NewTaskError(f"{flag} {part!r}: write name:dim=value,dim=value (shapes apart by ';')")
        got = dict(dims)
        for item in [x.strip() for x in rest.split(",") if x.strip()]:
            k, eq, v = item.partition("=")
            k = k.strip()
            if k not in dims:
                near = closest(k, dims)
                raise NewTaskError(f"{flag} {name!r}: no dim {k!r} (" + (f"did you mean {near}? " if near else "")
                                   + f"the dims: {', '.join(dims)})")
            try:
                got[k] = int(v)
            except ValueError:
                got[k] = 0
            if not eq or got[k] <= 0:
                raise NewTaskError(f"{flag} {name!r}: {item!r}: a dim's value is a positive integer")
        if name in [n for n, _ in out]:
            raise NewTaskError(f"{flag}: two shapes named {name!r}")
        out.append((name, got))
    if not out:
        raise NewTaskError(f"{flag} {text!r}: no shape in it")
    return out


def _numel(axes: tuple, dims: dict) -> int:
    return math.prod(dims[a] if isinstance(a, str) else a for a in axes)


def _prime_below(v: int) -> int:
    if v <= 3:
        return v
    n = v - 1
    while n > 2 and any(n % k == 0 for k in range(2, int(n ** 0.5) + 1)):
        n -= 1
    return n


def small_dims(dims: dict, args: list[Arg]) -> dict:
    """The dims halved, largest first, until the largest input has at most INTERP_ELEMENTS elements."""
    d = dict(dims)
    tensors = [a.axes for a in args if a.tensor]
    while tensors and max(_numel(ax, d) for ax in tensors) > INTERP_ELEMENTS:
        k = max((k for k in d if d[k] > 1), key=lambda k: d[k], default=None)
        if k is None:
            break
        d[k] = (d[k] + 1) // 2
    return d


# -- the files -----------------------------------------------------------------------------------

def _nice(v: float, scale: float) -> float:
    """`v` for reference.py: 0 where it is under 5% of `scale`, else one significant figure where that is
    within 5%, else two (randn's mean 0.0038 and std 0.987 read 0.0 and 1.0)."""
    if abs(v) < 0.05 * abs(scale):
        return 0.0
    one = float(f"{v:.1g}")
    return one if abs(one - v) <= 0.05 * abs(v) else float(f"{v:.2g}")


def _draw_of(arg: Arg, dims: dict[str, int]) -> tuple:
    """How make_inputs draws an argument like the example's (made at `dims`): randn at its mean and
    std; uniform over its range where it is never negative; integers over theirs, or over a dim's
    range where they look like indices into it (0 to at least half of the dim, below it: drawn below
    the dim of each shape); the share of True."""
    import torch  # (as above)

    x = arg.value.detach()
    if x.dtype == torch.bool:
        return ("bernoulli", _nice(float(x.float().mean()), 1.0) if x.numel() else 0.5, None)
    if not x.is_floating_point():
        lo, hi = (int(x.min()), int(x.max())) if x.numel() else (0, 1)
        over = sorted((v, d) for d, v in dims.items() if lo >= 0 and hi < v <= 2 * (hi + 1))
        return ("index", over[0][1], None) if over else ("randint", lo, hi)
    f = x.float()
    f = f[torch.isfinite(f)]
    if f.numel() == 0:
        return ("normal", 0.0, 1.0)
    lo, hi, mean = float(f.min()), float(f.max()), float(f.mean())
    std = float(f.std()) if f.numel() > 1 else 0.0
    if lo >= 0 and hi > lo:
        return ("uniform", _nice(lo, hi - lo), _nice(hi, hi - lo))
    if std == 0:  # a constant (a weight of ones): drawn around it, or a kernel that ignores it would pass
        return ("normal", _nice(mean, 1.0), _nice(max(abs(mean) * 0.1, 0.1), 1.0))
    return ("normal", _nice(mean, std), _nice(std, std))


def render_reference(copied: str, func: str, origin: str, args: list[Arg], outputs: list[tuple],
                     draws: dict[str, tuple]) -> str:
    tensors = [a for a in args if a.tensor]
    call = ", ".join(a.name if a.tensor else _constant_source(a.value, a.name) for a in args)
    inputs = "\n".join(f"    {a.name!r}: ({a.axes!r}, {a.dtype!r}, {draws[a.name]!r})," for a in tensors)
    outs = "\n".join(f"    ({axes!r}, {dt!r})," for axes, dt in outputs)
    return f'''"""Reference of this task: {func} from {origin}, copied by `tasks new` (the task's source of truth).

The copy below is {func} as it was, with what it uses from its file: the task stands alone, and
task.toml [source] keeps where it came from (`tasks validate` says when the original changed).
Below it: the inputs make_inputs draws (one entry per argument: each axis a dim of task.toml's shapes or
a fixed size; "task" is the task's dtype), the outputs' shapes for the roofline, and reference().
"""
{copied}


import math

import torch

# argument: (axes, dtype, how values are drawn: ("normal", mean, std) | ("uniform", lo, hi) |
#            ("randint", lo, hi) | ("index", dim, None): 0 to dims[dim] - 1 | ("bernoulli", p, None)),
#            from the example's values
_INPUTS = {{
{inputs}
}}
# each output: (axes, dtype), as {func} returned them on the example
_OUTPUTS = [
{outs}
]
# Inputs that test what a caller may pass (values ~1e4, masked rows...): name -> what it tests;
# make_inputs builds one when dims["case"] names it (README, "Writing a task").
HARD_CASES = {{}}


def _draw(axes, dtype, how, dims, g, device):
    shape = [dims[a] if isinstance(a, str) else a for a in axes]
    kind, a, b = how
    if kind == "randint":
        return torch.randint(a, b + 1, shape, generator=g, device=device, dtype=dtype)
    if kind == "index":
        return torch.randint(0, dims[a], shape, generator=g, device=device, dtype=dtype)
    if kind == "bernoulli":
        return torch.rand(shape, generator=g, device=device) < a
    if kind == "uniform":
        return (torch.rand(shape, generator=g, device=device) * (b - a) + a).to(dtype)
    return (torch.randn(shape, generator=g, device=device) * b + a).to(dtype)


def make_inputs(dims, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    return tuple(_draw(axes, dtype if dt == "task" else getattr(torch, dt), how, dims, g, device)
                 for axes, dt, how in _INPUTS.values())


def reference({", ".join(a.name for a in tensors)}):
    return {func}({call})


def bytes_moved(dims, dtype):
    """Every input read once and every output written once: the least a kernel moves."""
    def size(axes, dt):
        n = math.prod(dims[a] if isinstance(a, str) else a for a in axes)
        return n * torch.empty((), dtype=dtype if dt == "task" else getattr(torch, dt)).element_size()

    return sum(size(axes, dt) for axes, dt, _ in _INPUTS.values()) + sum(size(axes, dt) for axes, dt in _OUTPUTS)
'''


def render_kernel(copied: str, func: str, origin: str, args: list[Arg], incumbent: str, why: str) -> str:
    tensors = [a.name for a in args if a.tensor]
    call = ", ".join(a.name if a.tensor else _constant_source(a.value, a.name) for a in args)
    head = f'''"""The incumbent of this task: {func} itself ({origin}), run by PyTorch ({incumbent}).

Not a kernel to edit: a candidate replaces this module with a kernel of the task's DSL that computes
the same (the static stage requires one; this baseline is never checked statically, as no incumbent
is) and is kept when it is correct and faster than this, timed the same way in a process of its own.
How it runs: {why}
"""
{copied}
'''
    if call == ", ".join(tensors) and incumbent == "eager":
        return head  # FUNC itself is the entry
    run = f"_{func}_eager = {func}\n"
    if incumbent == "torch.compile":
        run = ("import torch  # noqa: E402 - after the copy, which may start with a __future__ import\n\n" + run
               + "# dynamic=False: one compile specialised to each shape, as a person timing torch.compile per shape gets\n"
               + f"_{func}_run = torch.compile(_{func}_eager, dynamic=False)\n")
    else:
        run += f"_{func}_run = _{func}_eager\n"
    return head + f'''

{run}

def {func}({", ".join(tensors)}):
    return _{func}_run({call})
'''


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dims_inline(d: dict) -> str:
    return "{ " + ", ".join(f"{k} = {v}" for k, v in d.items()) + " }"


def render_toml(name: str, summary: str, dsl: str, entry: str, dtypes: list[str], src: dict, shapes: list,
                interp: list, tolerance: dict, heldout: dict, args: list[Arg], command: str,
                variants: list[str] = ()) -> str:
    lines = [f"# Made by `{command}`.",
             "# Edit freely; `" + warpsmith_command("tasks validate " + name) + "` checks every key and runs the reference.",
             f"name = {_toml_str(name)}", f"summary = {_toml_str(summary)}", f"dsl = {_toml_str(dsl)}",
             f"entry = {_toml_str(entry)}               # the function every candidate defines",
             "dtypes = [" + ", ".join(_toml_str(d) for d in dtypes) + "]",
             "rules = [" + ", ".join(_toml_str(r) for r in (*RULES, f"dsl-{dsl}")) + "]"]
    if variants:
        lines += ["# Starting kernels the tuner searches among (their knobs); the incumbent is the function itself.",
                  "variants = [" + ", ".join(_toml_str(v) for v in variants) + "]"]
    lines += ["", "# The PyTorch function this task was made from: its copy in reference.py is the source of truth,",
              "# and kernel.py runs it as the incumbent (eager | torch.compile).", "[source]"]
    lines += [f"{k} = {_toml_str(v)}" for k, v in src.items()]
    for key, rows in (("shapes", shapes), ("interpreter_shapes", interp)):
        lines.append("")
        if key == "interpreter_shapes":
            lines.append("# Where only Triton's interpreter runs (no GPU): small, one of them with odd sizes.")
        for n, d in rows:
            lines += [f"[[{key}]]", f"name = {_toml_str(n)}", f"dims = {_dims_inline(d)}", ""]
        lines.pop()
    for dt, (atol, rtol) in tolerance.items():
        lines += ["", f"[tolerance.{dt}]", f"atol = {atol:g}", f"rtol = {rtol:g}"]
    if heldout:
        lines += ["", "# Shapes no [[shapes]] lists, drawn anew every evaluation from these inclusive ranges",
                  "# (correctness only; capped at 256 MiB of inputs on the GPU, the interpreter shapes' sizes there).",
                  "[heldout]"] + [f"{k} = [{lo}, {hi}]" for k, (lo, hi) in heldout.items()]
    lines += ["", "# What a caller may pass (harness/authoring/contract.py): a PyTorch function takes any strides, so every",
              "# 2-D+ tensor is also passed as a view of a wider tensor and transposed. Narrow it if your callers don't.",
              "[contract]"]
    for a in args:
        if not a.tensor:
            continue
        lays = ["contiguous", "row-strided", "transposed"] if len(a.axes) >= 2 else ["contiguous"]
        lines += ["", f"[contract.inputs.{a.name}]", f"dtype = {_toml_str(a.dtype)}",
                  "layouts = [" + ", ".join(_toml_str(x) for x in lays) + "]"]
    return "\n".join(lines) + "\n"


# -- checking what the reference does -------------------------------------------------------------

def _run_reference(ref: ModuleType, dims: dict, dtype: str, seed: int = 0) -> tuple[Any, str | None]:
    """(outputs, None) or (None, why): FUNC on make_inputs's inputs for dims, finite where floating."""
    import torch  # (as above)

    try:
        xs = ref.make_inputs(dims, getattr(torch, dtype), seed, "cpu")
        out = ref.reference(*xs)
    except Exception as e:  # FUNC refusing a shape is an answer, said to the person
        return None, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    outs = out if isinstance(out, (tuple, list)) else (out,)
    if not outs or not all(isinstance(o, torch.Tensor) for o in outs):
        return None, "it returned something other than a tensor or a tuple of tensors"
    if any(o.is_floating_point() and not torch.isfinite(o).all() for o in outs):
        return None, "its output has NaN/Inf"
    return outs, None


def _output_axes(probes: list[tuple[dict, tuple]], task_dtype: str) -> list[tuple] | None:
    """Each output's axes: the dim whose value the axis has on every probe (the probes vary each dim
    alone), else its size where that never changes; None where an axis follows no single dim (a
    flattened or computed size: no bytes_moved then)."""
    first = probes[0][1]
    result = []
    for k, o in enumerate(first):
        axes: list = []
        for a in range(o.dim()):
            sizes = [outs[k].shape[a] if len(outs) > k and outs[k].dim() == o.dim() else None for _, outs in probes]
            fits = [d for d in probes[0][0] if all(s == dims.get(d) for s, (dims, _) in zip(sizes, probes))]
            if fits:
                axes.append(fits[0])
            elif len(set(sizes)) == 1 and sizes[0] is not None:
                axes.append(sizes[0])
            else:
                return None
        dt = str(o.dtype).removeprefix("torch.")
        result.append((tuple(axes), "task" if dt == task_dtype else dt))
    return result


def _tolerance(dtypes: list[str], outs: tuple) -> dict[str, tuple[float, float]]:
    import torch  # (as above)

    mags = torch.cat([o.detach().float().abs().flatten() for o in outs if o.is_floating_point()] or [torch.ones(1)])
    typical = float(mags.median()) if mags.numel() else 1.0
    out = {}
    for dt in dtypes:
        atol, rtol = TOLERANCES[dt]
        if typical > 0 and atol > typical / 10:
            atol = 10.0 ** math.floor(math.log10(typical / 10))
        out[dt] = (atol, rtol)
    return out


# -- the incumbent ---------------------------------------------------------------------------------

def _graph_us(fn: Callable, xs: tuple, calls: int = 10, replays: int = 15) -> float:
    """Median microseconds per call over CUDA-graph replays of `calls` calls (the timing stage's batches
    replay graphs too): the GPU's time, not Python's launches."""
    from harness.profiling.measure import capture_graph, replay_us  # (torch: as above)

    def body() -> None:
        for _ in range(calls):
            fn(*xs)

    fn(*xs)  # torch.compile compiles here, outside the warm-up's side stream
    g, _ = capture_graph(body, warmup=1)
    return replay_us(g, calls, replays)


def choose_incumbent(ref: ModuleType, func: Callable, shapes: list[tuple[str, dict]], dtype: str, wanted: str,
                     call: Callable) -> tuple[str, str]:
    """(eager | torch.compile, why), measured on the GPU where there is one and `wanted` is auto."""
    import torch  # (as above)

    if wanted != "auto":
        return wanted, f"{wanted}: as --incumbent {wanted} asked."
    if not torch.cuda.is_available():
        return "eager", ("eager: no GPU here to time torch.compile against eager (on a CPU the comparison says "
                         "nothing about the GPU); on the GPU box, make the task again with --force to measure "
                         "both, or pass --incumbent torch.compile.")
    compiled = torch.compile(func, dynamic=False)
    rows, ratios = [], []
    for name, dims in shapes:
        xs = ref.make_inputs(dims, getattr(torch, dtype), 0, "cuda")
        try:
            e = _graph_us(lambda *a: call(func, *a), xs)
            c = _graph_us(lambda *a: call(compiled, *a), xs)
        except Exception as ex:  # torch.compile failing on FUNC is an answer: the eager one it is
            return "eager", f"eager: torch.compile failed on {name!r} ({type(ex).__name__}: {str(ex)[:120]})."
        finally:
            del xs
        ratios.append(e / c)
        rows.append(f"{name} {e:.1f} us eager, {c:.1f} us compiled")
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    pick = "torch.compile" if geo > 1.0 else "eager"
    return pick, (f"{pick}: the faster on {torch.cuda.get_device_name(0)} (CUDA-graph replays, median per call: "
                  f"{'; '.join(rows)}; torch.compile {geo:.2f}x eager's speed, geomean).")


# -- making it --------------------------------------------------------------------------------------

@dataclass
class Request:
    """What `warpsmith tasks new` was asked (warpsmith/commands/tasks.py)."""
    name: str
    source: str                                  # FILE.py:FUNC
    dest: Path | None = None                     # default ./kernels/NAME
    shapes: str | None = None                    # "name:dim=v,...;..." (default: the example's)
    example: str | None = None                   # an expression (default: FILE.py's example_inputs())
    dtypes: str | None = None                    # "bfloat16,float16" (default: the example's)
    dsl: str = "triton"
    incumbent: str = "auto"                      # auto | eager | torch.compile
    interpreter_shapes: str | None = None        # default: derived from the first GPU shape
    variants: tuple[Path, ...] = ()              # starting kernels of the person's, for the tuner
    force: bool = False
    command: str = ""                            # as typed, for task.toml's first line


def create(req: Request) -> Made:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", req.name):
        raise NewTaskError(f"{req.name!r}: a task name is letters, digits, '_', '-' and '.'")
    if req.dsl not in DSLS:
        raise NewTaskError(f"--dsl {req.dsl!r}: one of {', '.join(DSLS)}")
    root = Path(req.dest) if req.dest is not None else Path("kernels") / req.name
    if root.exists() and not req.force:
        raise NewTaskError(f"{root}: already exists; pass --force to replace it")
    for v in req.variants:
        if not Path(v).is_file():
            raise NewTaskError(f"{v}: no such file (--variant)")
    path, fname = parse_from(req.source)
    copied, func_src, func_line = copy_of(path, fname)
    clash = sorted(_bound_by_text(copied) & set(GENERATED))
    if clash:
        raise NewTaskError(f"{path}: the copy of {fname} defines {', '.join(clash)}, a name reference.py needs itself: "
                           "rename it in the file")
    folder = str(path.resolve().parent)
    sys.path.insert(0, folder)  # FILE.py's own imports, and example_inputs's, while it is used
    try:
        return _Maker(req, root, path, fname, copied, func_src, func_line).make()
    finally:
        sys.path.remove(folder)


class _Maker:
    """One `tasks new`: the example read, the copy proved, shapes and ranges probed, the files written."""

    def __init__(self, req: Request, root: Path, path: Path, fname: str, copied: str, func_src: str, func_line: int):
        self.req, self.root, self.path, self.fname = req, root, path, fname
        self.copied, self.func_src, self.func_line = copied, func_src, func_line
        self.origin = f"{path.name}:{func_line}"
        self.mod = load_user_module(path)
        self.func = getattr(self.mod, fname)
        self.notes: list[str] = []

    # -- the example: arguments, dims, dtypes ----------------------------------------------------
    def _bind(self, values: tuple) -> list[Arg]:
        params = _param_names(self.func, self.fname, self.path)
        if len(values) > len(params) and not (params and params[-1].startswith("*")):
            raise NewTaskError(f"the example gives {len(values)} arguments; {self.fname}() takes {len(params)}")
        names = [p if not p.startswith("*") else f"arg{i}" for i, p in enumerate(params[:len(values)])]
        names += [f"arg{i}" for i in range(len(names), len(values))]
        return [Arg(n, v) for n, v in zip(names, values)]

    def example(self) -> None:
        """self.args (the example's values, each tensor's axes), self.dims, and the dims the values were made at."""
        import torch  # (as above)

        maker = getattr(self.mod, "example_inputs", None)
        if self.req.example is None and not callable(maker):
            raise NewTaskError(f"{self.path}: no example inputs: define example_inputs() in it (returning "
                               f"{self.fname}'s arguments; its int keyword parameters are the dims), or pass "
                               "--example \"EXPR\"")
        kw_dims = _dims_of_example(maker) if self.req.example is None else {}
        if kw_dims:
            probe = self._bind(_example_at(maker, kw_dims))
            axes = _axes_by_probing(maker, kw_dims, [a.name for a in probe])
            for a, ax in zip(probe, axes):
                a.axes = ax
            self.value_dims = small_dims(kw_dims, probe)  # the values are read off a small example
            try:
                values = _as_args(maker(**self.value_dims), "example_inputs()")
            except Exception:  # example_inputs refusing the small sizes: the full ones, for their values
                self.value_dims = kw_dims
                values = _as_args(maker(**kw_dims), "example_inputs()")
            self.args = self._bind(values)
            for a, ax in zip(self.args, axes):
                a.axes = ax
            self.dims, self.dims_how = kw_dims, "from example_inputs()'s keyword parameters"
        else:
            where = "--example" if self.req.example is not None else "example_inputs()"
            try:
                got = eval(self.req.example, {**vars(self.mod), "torch": torch}) if self.req.example is not None \
                    else maker()  # noqa: S307 - the person's own expression, in their own file's namespace
                values = _as_args(got, where)
            except NewTaskError:
                raise
            except Exception as e:  # the person's expression or function: say which
                raise NewTaskError(f"{where} failed: {type(e).__name__}: {e}") from None
            self.args = self._bind(values)
            self.dims = self.value_dims = _axes_by_size(self.args, self.notes)
            self.dims_how = "from the example's sizes (axes of equal size share a dim)"
        if not any(a.tensor for a in self.args):
            raise NewTaskError("the example has no tensor argument: nothing for a kernel to read")

    def dtypes(self) -> None:
        floats = [a for a in self.args if a.tensor and a.value.is_floating_point()]
        self.found = str(floats[0].value.dtype).removeprefix("torch.") if floats else "float32"
        given = self.req.dtypes
        self.task_dtypes = [d.strip() for d in given.split(",") if d.strip()] if given else [self.found]
        bad = [d for d in self.task_dtypes if d not in DTYPES]
        if bad or not self.task_dtypes:
            raise NewTaskError(f"dtype {(bad or [self.found])[0]!r}: a task's dtypes are drawn from {', '.join(DTYPES)}"
                               + ("" if given else " (the example's first floating tensor has it; pass --dtypes)"))
        for a in self.args:
            if a.tensor:
                dt = str(a.value.dtype).removeprefix("torch.")
                a.dtype = "task" if (dt == self.found and a.value.is_floating_point()) else dt

    # -- checks of the reference -------------------------------------------------------------------
    def check_copy(self, ref: ModuleType) -> None:
        """The copy, proved faithful: FUNC's output on the example, bit for bit."""
        def clones() -> list:
            return [a.value.clone() if a.tensor else a.value for a in self.args]

        try:
            want = self.func(*clones())
        except Exception as e:  # FUNC failing on its own example
            raise NewTaskError(f"{self.path}:{self.func_line}: {self.fname} failed on the example: "
                               f"{type(e).__name__}: {e}") from None
        if not _same(want, getattr(ref, self.fname)(*clones())):
            raise NewTaskError(f"{self.path}:{self.func_line}: the copy of {self.fname} (with what it uses from "
                               f"{self.path.name}) returned another output than the original on the example: it "
                               "depends on state the copy doesn't have, or is not deterministic")

    def interpreter(self, ref: ModuleType) -> None:
        """self.interp: the shapes FUNC runs on (derived, or --interpreter-shapes); self.probes: (dims, outputs)."""
        if self.req.interpreter_shapes:
            wanted = parse_shapes(self.req.interpreter_shapes, self.dims, "--interpreter-shapes")
        else:
            small = small_dims(self.gpu_shapes[0][1], self.args)
            ragged = {k: _prime_below(v) for k, v in small.items()}
            wanted = [("small", small)] + ([("ragged", ragged)] if ragged != small else [])
        self.interp, self.dropped, self.probes = [], [], []
        for n, d in wanted:
            outs, why = _run_reference(ref, d, self.task_dtypes[0])
            if outs is None:
                self.dropped.append(f"interpreter shape {n!r} ({_dims_inline(d)}): {self.fname} failed on it: {why}")
            else:
                self.interp.append((n, d))
                self.probes.append((d, outs))
        if not self.interp:
            raise NewTaskError(f"{self.fname} runs on no interpreter shape ({'; '.join(self.dropped)}); give "
                               "--interpreter-shapes \"name:dim=v,...\" where it does")

    def heldout(self, ref: ModuleType) -> None:
        """Ranges [1, twice the largest GPU value] for every dim, where FUNC runs with every dim odd at once
        and with each dim at 1 beside the others odd (held-out draws combine dims: one refused combination
        would fail every evaluation, so it is all of them or none)."""
        self.ranges: dict[str, list[int]] = {}
        odd = {k: _prime_below(v) if v > 3 else v + 2 for k, v in self.interp[0][1].items()}
        for dims in [odd] + [{**odd, k: 1} for k in self.dims]:
            outs, why = _run_reference(ref, dims, self.task_dtypes[0])
            if outs is None:
                self.notes.append(f"no [heldout]: {self.fname} failed on {_dims_inline(dims)} ({why}); held-out "
                                  "shapes combine odd sizes and 1s")
                return
            self.probes.append((dims, outs))
        self.ranges = {k: [1, 2 * max(d[k] for _, d in self.gpu_shapes)] for k in self.dims}

    # -- the files ---------------------------------------------------------------------------------
    def make(self) -> Made:
        self.example()
        self.dtypes()
        self.gpu_shapes = parse_shapes(self.req.shapes, self.dims) if self.req.shapes else [("example", dict(self.dims))]
        draws = {a.name: _draw_of(a, self.value_dims) for a in self.args if a.tensor}
        name, fname = self.req.name, self.fname
        parent = self.root.parent if self.root.parent.exists() else None
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=str(parent) if parent else None))
        try:
            ref_path = work / "reference.py"
            ref_path.write_text(render_reference(self.copied, fname, self.origin, self.args, [], draws))
            ref = load_module(ref_path, f"warpsmith_newtask_{name}")
            self.check_copy(ref)
            self.interpreter(ref)
            self.heldout(ref)
            for k in self.dims:  # each dim doubled alone: which dim each output axis follows
                dims = {**self.interp[0][1], k: 2 * self.interp[0][1][k]}
                outs, _ = _run_reference(ref, dims, self.task_dtypes[0])
                if outs is not None:
                    self.probes.append((dims, outs))
            outputs = _output_axes(self.probes, self.found)
            text = render_reference(self.copied, fname, self.origin, self.args, outputs or [], draws)
            if outputs is None:
                self.notes.append("an output axis follows no single dim (a flattened or computed size): reference.py "
                                  "has no bytes_moved, so no roofline; write one")
                text = text[:text.index("\ndef bytes_moved")].rstrip() + "\n"
            ref_path.write_text(text)
            ref = load_module(ref_path, f"warpsmith_newtask_{name}")
            tolerance = _tolerance(self.task_dtypes, self.probes[0][1])

            def call(fn: Callable, *xs: Any) -> Any:  # FUNC on the tensors, with the example's constants
                it = iter(xs)
                return fn(*[next(it) if a.tensor else a.value for a in self.args])

            inc, why = choose_incumbent(ref, getattr(ref, fname), self.gpu_shapes, self.task_dtypes[0],
                                        self.req.incumbent, call)
            (work / "kernel.py").write_text(render_kernel(self.copied, fname, self.origin, self.args, inc, why))
            variants = self._variants(work)
            src = {"function": fname, "file": os.path.relpath(self.path.resolve(), self.root.resolve()),
                   "sha256": sha256_of(self.func_src), "incumbent": inc}
            doc = (inspect.getdoc(self.func) or "").strip().splitlines()
            (work / "task.toml").write_text(render_toml(
                name, doc[0] if doc else f"{fname} from {self.path.name}", self.req.dsl, fname, self.task_dtypes, src,
                self.gpu_shapes, self.interp, tolerance, self.ranges, self.args,
                self.req.command or warpsmith_command(f"tasks new {name} --from {self.req.source}"), variants))
            try:
                load_task(work)  # every check a task gets, before the folder is where commands look
            except TaskError as e:
                raise NewTaskError(f"the task made from {fname} fails its own checks: {e}") from None
            if self.root.exists():
                shutil.rmtree(self.root)
            self.root.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(work), str(self.root))
        finally:
            if work.exists():
                shutil.rmtree(work, ignore_errors=True)
        return Made(self.root, fname, self.dims, self.dims_how, self.gpu_shapes, self.interp, self.dropped,
                    self.ranges, inc, why, tolerance, self.notes, variants)

    def _variants(self, work: Path) -> list[str]:
        """The person's starting kernels, copied into variants/ (the tuner searches their knobs)."""
        out = []
        for v in self.req.variants:
            rel = f"variants/{Path(v).name}"
            (work / "variants").mkdir(exist_ok=True)
            shutil.copyfile(v, work / rel)
            try:
                check_baseline_defines_entry(work / rel, self.fname)
            except TaskError:
                raise NewTaskError(f"{v}: no module-level `def {self.fname}(...)`: a starting kernel defines the "
                                   "task's entry, the function's name") from None
            out.append(rel)
        return out


def _bound_by_text(copied: str) -> set[str]:
    return set().union(*(_bound_by(s) for s in ast.parse(copied).body)) if copied.strip() else set()


def _param_names(func: Callable, fname: str, path: Path) -> list[str]:
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        raise NewTaskError(f"{path}: {fname} has no signature to read") from None
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            out.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            out.append("*" + p.name)
    return out


def _same(a: Any, b: Any) -> bool:
    import torch  # (as above)

    if isinstance(a, (tuple, list)):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, torch.Tensor):
        if not (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape):
            return False
        if a.is_floating_point():  # NaN where the original gives NaN (rsqrt of a negative) is the same
            return torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)
        return torch.equal(a, b)
    return type(a) is type(b) and a == b

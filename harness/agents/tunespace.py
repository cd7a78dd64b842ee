"""What the tuner may turn, and over what: declared search spaces, read without running the code.

A person declares a space in any candidate with comments (tree-sitter reads them; nothing is imported):

    # warpsmith: tune BLOCK in [1024, 2048, 4096]       a module-level UPPER_CASE int constant, or
    # warpsmith: tune num_warps in [4, 8, 16]           a keyword of a kernel launch (kernel[grid](..., num_warps=8))
    # warpsmith: require BLOCK // (32 * num_warps) <= 64
                                                        a condition every proposed configuration meets

`require` is arithmetic (+ - * // / % **, min, max, comparisons, and/or/not) over the tuned names and
the hardware limits below; it is evaluated by a small AST walker, never by eval. Literals nobody
declared are still found (launch num_warps/num_stages/UPPER_CASE blocks, UPPER_CASE module ints) and
searched over a ladder around their value: powers of two for blocks (tl.arange needs them),
1..32 warps, 1..5 stages. Built in, always: num_warps <= max_warps, a block-like knob whose literal
is a power of two only takes powers of two, and `smem_per_block` (bytes) / `regs_per_thread` are
there for `require` lines to use, with `regs_per_sm` / `smem_per_sm` / `warps_per_sm` (programs that
must be resident together).
"""
from __future__ import annotations

import ast
import itertools
import operator
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Parser

from harness.agents.tuner_knobs import PY, Knob, find_knobs, kind_of
from harness.authoring.hardware import specs_of

# Architectural limits of every NVIDIA GPU since Volta (CUDA C++ Programming Guide, "Compute
# Capabilities" table): 1024 threads per block = 32 warps, 255 registers per thread.
ARCH = {"max_warps": 32, "regs_per_thread": 255}
# Shared memory per block when no hardware pack is selected (H100/H200: 227 KiB, the packs' figure).
DEFAULT_SMEM_KIB = 227
# Per SM, for kernels that need several programs resident at once (a persistent grid whose programs
# wait for each other): the hardware pack's registers_per_sm_kib, smem_per_sm_kib and warps_per_sm,
# else H100/H200's (CUDA C++ Programming Guide, "Compute Capabilities": 64K 32-bit registers,
# 228 KiB shared memory, 64 warps per SM for compute capability 9.0).
PER_SM = {"regs_per_sm": 65536, "smem_per_sm": 228 * 1024, "warps_per_sm": 64}

DECL = re.compile(r"#\s*warpsmith:\s*(tune|require)\s+(.*)$")
TUNE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s+in\s+\[([^\]]*)\]\s*$")

WARPS = [1, 2, 4, 8, 16, 32]


class SpaceError(ValueError):
    """A declaration that can't be used; str() names the file, line and problem."""


@dataclass
class Param:
    name: str  # BLOCK, num_warps, ...
    values: list[int]
    knobs: list[Knob]  # the literals it sets (a launch keyword may appear in several launches)
    declared: bool
    default: int  # the value written in the file

    @property
    def kind(self) -> str:
        return kind_of(self.knobs[0]) if self.knobs else "block"


@dataclass
class Space:
    variant: str  # "kernel.py", "variants/rows.py", or "incumbent"
    source: str
    params: list[Param] = field(default_factory=list)
    requires: list[tuple[int, str, ast.Expression]] = field(default_factory=list)  # (line, text, parsed)
    notes: list[str] = field(default_factory=list)  # declarations dropped, and why

    def default(self) -> dict[str, int]:
        return {p.name: p.default for p in self.params}

    def feasible(self, config: dict[str, int], limits: dict[str, int]) -> str | None:
        """None if the configuration can launch, else why not (the failing require, as written)."""
        env = {**limits, **config}
        for line, text, tree in self.requires:
            try:
                if not _eval(tree.body, env):
                    return f"line {line}: require {text}"
            except (KeyError, ZeroDivisionError, TypeError, ValueError) as e:
                return f"line {line}: require {text} ({e})"
        for p in self.params:
            if p.kind == "num_warps" and config.get(p.name, 1) > limits["max_warps"]:
                return f"{p.name}={config[p.name]} is more than {limits['max_warps']} warps per program"
        return None

    def grid(self, limits: dict[str, int]) -> list[dict[str, int]]:
        names = [p.name for p in self.params]
        out = []
        for combo in itertools.product(*(p.values for p in self.params)):
            config = dict(zip(names, combo))
            if self.feasible(config, limits) is None:
                out.append(config)
        return out

    def render(self, config: dict[str, int]) -> str:
        """The variant's source with the configuration's values written into its literals."""
        changes = {}
        for p in self.params:
            for k in p.knobs:
                changes[k] = config.get(p.name, p.default)
        data = self.source.encode()
        for knob, value in sorted(changes.items(), key=lambda kv: -kv[0].start):
            data = data[:knob.start] + str(value).encode() + data[knob.end:]
        return data.decode()


_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
        ast.Div: operator.truediv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}


def _eval(node, env):
    """Arithmetic and comparisons only: a declaration is data, never code to run."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        return _BIN[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        v = _eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else not v
    if isinstance(node, ast.BoolOp):
        vals = [_eval(v, env) for v in node.values]
        return all(vals) if isinstance(node.op, ast.And) else any(vals)
    if isinstance(node, ast.Compare):
        left = _eval(node.left, env)
        for op, right in zip(node.ops, node.comparators):
            r = _eval(right, env)
            if type(op) not in _CMP or not _CMP[type(op)](left, r):
                return False
            left = r
        return True
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("min", "max") \
            and not node.keywords:
        return (min if node.func.id == "min" else max)(_eval(a, env) for a in node.args)
    raise ValueError(f"unsupported expression {ast.dump(node)[:40]}")


def _check_expr(node, names: set[str]) -> str | None:
    # min/max as callees are the two functions allowed; as plain names they are unknown like any other.
    callees = {id(n.func) for n in ast.walk(node)
               if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("min", "max")}
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id not in names and id(n) not in callees:
            return f"unknown name {n.id!r} (tuned names and {', '.join(sorted([*ARCH, *PER_SM, 'smem_per_block']))})"
        if isinstance(n, (ast.Attribute, ast.Subscript, ast.Lambda, ast.Starred, ast.keyword)):
            return "only arithmetic, comparisons, min and max"
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Name) and n.func.id in ("min", "max")):
            return "only min() and max() may be called"
    return None


def ladder(knob: Knob) -> list[int]:
    """Values for a literal nobody declared: a few steps either side of what is written."""
    v, kind = knob.value, kind_of(knob)
    if kind == "num_warps":
        return [w for w in WARPS if v / 4 <= w <= v * 4] or [v]
    if kind == "num_stages":
        return sorted({max(1, min(5, x)) for x in (v - 1, v, v + 1, v + 2)})
    if v > 0 and v & (v - 1) == 0:
        return [x for x in (v // 4, v // 2, v, v * 2, v * 4) if 16 <= x <= 65536]
    return [v]


def is_pow2(v: int) -> bool:
    return v > 0 and v & (v - 1) == 0


def _comments(source: str):
    tree = Parser(PY).parse(source.encode())
    stack = [tree.root_node]
    while stack:
        n = stack.pop()
        if n.type == "comment":
            yield n.start_point[0] + 1, n.text.decode(errors="replace")
        stack.extend(n.children)


def read_space(source: str, variant: str = "incumbent") -> Space:
    """The variant's space: its declarations, then every undeclared literal knob on a ladder.
    A declaration naming nothing tunable, or with no usable value, raises SpaceError (file, line)."""
    knobs = find_knobs(source)
    by_name: dict[str, list[Knob]] = {}
    for k in knobs:
        by_name.setdefault(k.name, []).append(k)
    space = Space(variant, source)
    declared: dict[str, list[int]] = {}
    pending_requires: list[tuple[int, str]] = []
    for line, text in sorted(_comments(source)):
        m = DECL.search(text)
        if not m:
            continue
        verb, rest = m.group(1), m.group(2).strip()
        where = f"{variant}:{line}"
        if verb == "require":
            pending_requires.append((line, rest))
            continue
        t = TUNE.match(rest)
        if not t:
            raise SpaceError(f"{where}: `# warpsmith: tune` wants `NAME in [v1, v2, ...]`, got {rest!r}")
        name, raw = t.group(1), t.group(2)
        try:
            values = [int(x.strip(), 0) for x in raw.split(",") if x.strip()]
        except ValueError:
            raise SpaceError(f"{where}: tune {name}: values must be integers, got [{raw}]") from None
        if name not in by_name:
            raise SpaceError(f"{where}: tune {name}: no UPPER_CASE int constant or launch keyword "
                             f"{name}=<int> in the file to write the values into")
        kind = kind_of(by_name[name][0])
        keep = [v for v in dict.fromkeys(values) if v > 0]
        if kind == "block" and is_pow2(by_name[name][0].value):
            dropped = [v for v in keep if not is_pow2(v)]
            keep = [v for v in keep if is_pow2(v)]
            if dropped:
                space.notes.append(f"{where}: {name} {dropped} dropped: not powers of two (tl.arange needs them)")
        if not keep:
            raise SpaceError(f"{where}: tune {name}: no usable value in [{raw}]")
        declared[name] = keep
    for name, ks in by_name.items():
        default = ks[0].value
        if name in declared:
            space.params.append(Param(name, declared[name], ks, True, default))
        else:
            values = sorted(set(v for k in ks for v in ladder(k)))
            if len(values) > 1:
                space.params.append(Param(name, values, ks, False, default))
    names = {p.name for p in space.params} | set(ARCH) | set(PER_SM) | {"smem_per_block"}
    for line, text in pending_requires:
        try:
            tree = ast.parse(text, mode="eval")
        except SyntaxError:
            raise SpaceError(f"{variant}:{line}: require {text!r} is not an expression") from None
        bad = _check_expr(tree, names)
        if bad:
            raise SpaceError(f"{variant}:{line}: require {text!r}: {bad}")
        space.requires.append((line, text, tree))
    return space


def hardware_limits(packs: list[dict]) -> tuple[dict[str, int], dict, str]:
    """(limits for `require`, the hardware pack's [specs] (harness.authoring.hardware.specs_of), which pack) from
    the prompt's packs."""
    for p in packs or []:
        path = Path(p.get("path", ""))
        toml = path / "pack.toml" if path.is_dir() else path
        try:
            raw = tomllib.loads(toml.read_text())
        except (OSError, tomllib.TOMLDecodeError):
            continue
        if raw.get("kind") == "hardware":
            specs = specs_of(raw)  # numbers only, an older hbm_tb_s read as mem_tb_s
            kib = specs.get("smem_per_block_kib", DEFAULT_SMEM_KIB)
            per_sm = {"regs_per_sm": int(specs.get("registers_per_sm_kib", 256) * 1024 // 4),
                      "smem_per_sm": int(specs.get("smem_per_sm_kib", PER_SM["smem_per_sm"] // 1024) * 1024),
                      "warps_per_sm": int(specs.get("warps_per_sm", PER_SM["warps_per_sm"]))}
            return ({**ARCH, **per_sm, "smem_per_block": int(kib * 1024)}, specs,
                    str(raw.get("id", p.get("id", ""))))
    return {**ARCH, **PER_SM, "smem_per_block": DEFAULT_SMEM_KIB * 1024}, {}, ""

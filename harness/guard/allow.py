"""The allowlist stage: a candidate may use only what is known to be safe, whatever it is spelled as.

Banning what has been seen loses to the next spelling (`operator.attrgetter("ex" "ec")(builtins)`,
`torch._C._DisableTorchDispatch()`, `setattr(mod, "__na" "me__", ...)`), so these checks allow
instead:

  allowed-imports  every `import X` / `from X import N` names a module (or a name) on the allowlist.
  allowed-names    every dotted name rooted at an import resolves to an allowed name; a module is
                   only ever the object of an attribute (`torch.empty`), never a value (`[torch][0]`
                   would hand over every attribute of it); `torch.ops.<ns>.<op>` only for an op the
                   candidate registers itself (torch.library.triton_op, a compiled extension's
                   TORCH_LIBRARY block), never another op of that namespace; and
                   builtins are allowed by name (no exec, eval, compile, __import__, globals, vars,
                   open, type, id, delattr, ...). Every annotation is a plain type expression (names,
                   subscripts, `|`, None; strings and module-level names in it likewise): typing's
                   get_type_hints and torch.library's schema inference eval() annotations.
                   Attributes are written (assigned, deleted, setattr) only on objects the module
                   owns: its classes, `self` in their methods, names bound to an instance of them;
                   a `_private` attribute is read only where the module defines that name.
  no-dunder        no double-underscore names at all (`__name__`, `__dict__`, `__class__`, getattr
                   with a literal dunder, a concatenated one included), except defining `__init__`,
                   `__call__`, `__post_init__`, `__repr__` in a class and calling `super().__init__`.
                   So `if __name__ == "__main__":` is refused too: nothing is ever skipped.

The allowlist is BASE_MODULES / BASE_NAMES here plus what each enforced rules pack adds in its
`[allow]` table (`modules`, `names`; docs/packs.md). A name is exact (`triton.cdiv`) or, for a
standard-library module only, `X.*` (every public attribute of X that is not itself a module,
read from the module at load). Past an allowed name that is not a module, attributes are those of a
value (`torch.cuda.get_device_properties(0).multi_processor_count`, `tl.float32.primitive_bitwidth`)
and are not judged here (torch on the entry path is: dsl.py's torch-compute).
"""
from __future__ import annotations

import ast
import builtins
import importlib
import re
import sys
import types
from dataclasses import dataclass, field
from functools import lru_cache

from tree_sitter import Node

from .pyparse import ModuleModel, string_value, text

# -- the base allowlist (a rules pack's [allow] table adds to it) ---------------------------------
BASE_MODULES = frozenset({"__future__", "math", "functools", "itertools", "typing", "dataclasses", "enum",
                          "torch", "torch.cuda", "torch.library"})
_DTYPES = (
    "float16 half bfloat16 float32 float float64 double int8 int16 short int32 int int64 long uint8 uint16 "
    "uint32 uint64 bool float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu "
    "float4_e2m1fn_x2").split()
# typing by name, not `typing.*`: get_type_hints and ForwardRef eval() strings (an annotation
# "ex" "ec(...)" was hidden code that passed every check).
_TYPING = (
    "Any Optional Union Callable Tuple List Dict Set FrozenSet Sequence MutableSequence Mapping MutableMapping "
    "Iterable Iterator Generator Type Literal Final ClassVar TypeVar Generic Protocol NamedTuple TypedDict "
    "Annotated TypeAlias Self NoReturn Never TYPE_CHECKING cast final runtime_checkable get_args "
    "get_origin SupportsInt SupportsFloat SupportsIndex Hashable Sized Collection Container").split()
# What is left out on purpose (issue 37, class 2: no allowed name may write into another module or
# the interpreter's state): enum.global_enum (writes a class's members into sys.modules[cls.__module__],
# the evaluator's own guard settings included), the rest of enum.* (EnumType builds classes from a
# dict; verify, member, pickle_by_* and the global_* helpers have no use in a kernel),
# dataclasses.make_dataclass (a class claiming any module through module=), typing.overload
# (registers into typing's global registry). An enum is written with class syntax; calling an
# enum class's functional API and `module=`/`qualname=` keywords are refused in check_names.
_ENUM = ("Enum", "IntEnum", "Flag", "IntFlag", "StrEnum", "auto", "unique")
BASE_NAMES = frozenset(
    {"__future__.annotations", "math.*", "itertools.*"}
    | {f"enum.{n}" for n in _ENUM}
    | {f"dataclasses.{n}" for n in ("dataclass", "field", "fields", "asdict", "astuple", "replace", "is_dataclass",
                                    "InitVar", "KW_ONLY", "MISSING", "Field", "FrozenInstanceError")}
    | {f"typing.{n}" for n in _TYPING}
    | {f"functools.{n}" for n in ("partial", "lru_cache", "cache", "reduce", "cached_property", "total_ordering",
                                  "cmp_to_key")}
    | {f"torch.{d}" for d in _DTYPES}
    | {f"torch.{n}" for n in (
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full", "full_like",
        "arange", "tensor", "Tensor", "Size", "dtype", "device", "finfo", "iinfo", "is_tensor", "is_floating_point",
        "get_default_dtype", "numel", "no_grad", "inference_mode", "contiguous_format", "strided")}
    | {f"torch.cuda.{n}" for n in (
        "current_device", "device", "get_device_properties", "get_device_capability", "get_device_name",
        "device_count", "is_available", "current_stream", "default_stream", "device_of")}
    # A kernel registered as a torch op (torch.compile sees through it); called as torch.ops.<ns>.<op>.
    | {"torch.library.triton_op", "torch.library.wrap_triton"}
)
# Builtins a kernel module needs. Not: exec eval compile __import__ globals locals vars open input
# breakpoint getattr/setattr/delattr beyond literal names (dynamic-lookup), type (metaclasses, MROs),
# id/hash (result caches), memoryview, dir, help, exit.
SAFE_BUILTINS = frozenset("""
abs all any bool bytes callable chr classmethod complex dict divmod enumerate filter float format frozenset
hasattr getattr setattr hex int isinstance issubclass iter len list map max min next object oct ord pow print
property range repr reversed round set slice sorted staticmethod str sum super tuple zip
True False None NotImplemented Ellipsis
Exception ArithmeticError AssertionError AttributeError ImportError IndexError KeyError LookupError
NotImplementedError OverflowError RuntimeError StopIteration TypeError ValueError ZeroDivisionError
""".split())
_DUNDER_DEFS = frozenset({"__init__", "__call__", "__post_init__", "__repr__"})

ALLOW_CHECKS = {
    "allowed-imports": "every import names a module or name on the allowlist (base + the rules packs' [allow])",
    "allowed-names": "every name reached from an import is on the allowlist; modules are never values; builtins by name; "
                     "annotations are plain types; attributes written only on the module's own objects",
    "no-dunder": "no double-underscore names (but defining __init__/__call__/__post_init__/__repr__), no __main__ block",
}


@dataclass
class Allowlist:
    modules: frozenset[str]
    exact: frozenset[str]
    wild: dict[str, frozenset[str]] = field(default_factory=dict)   # stdlib module -> its public non-module names

    def module(self, q: str, own_ops: set[str]) -> bool:
        if q in self.modules or q == "torch.ops":
            return True
        parts = q.split(".")
        return len(parts) == 3 and parts[:2] == ["torch", "ops"] and _own_namespace(parts[2], own_ops)

    def name(self, q: str, own_ops: set[str]) -> bool:
        """`own_ops`: the ops the module registers ("ns.op", own_ops())."""
        if q in self.exact:
            return True
        head, _, last = q.rpartition(".")
        if head in self.wild and last in self.wild[head]:
            return True
        parts = q.split(".")
        return len(parts) == 4 and parts[:2] == ["torch", "ops"] and f"{parts[2]}.{parts[3]}" in own_ops


def _stdlib_public(mod_name: str) -> frozenset[str]:
    mod = importlib.import_module(mod_name)
    return frozenset(n for n in dir(mod) if not n.startswith("_")
                     and not isinstance(getattr(mod, n, None), types.ModuleType))


def split_allow(entries: tuple[str, ...]) -> tuple[set[str], set[str]]:
    mods = {e[len("module:"):] for e in entries if e.startswith("module:")}
    names = {e[len("name:"):] for e in entries if e.startswith("name:")}
    return mods, names


@lru_cache(maxsize=32)
def build_allowlist(extra: tuple[str, ...] = ()) -> Allowlist:
    """The base list plus pack entries ("module:X" / "name:X.y" / "name:X.*")."""
    mods, names = split_allow(extra)
    modules = set(BASE_MODULES) | mods
    exact: set[str] = set()
    wild: dict[str, frozenset[str]] = {}
    for n in BASE_NAMES | names:
        if n.endswith(".*"):
            wild[n[:-2]] = _stdlib_public(n[:-2])
            modules.add(n[:-2])
        else:
            exact.add(n)
    return Allowlist(frozenset(modules), frozenset(exact), wild)


def validate_allow_entry(kind: str, entry: object) -> str | None:
    """Why a pack's [allow] entry is unusable, or None."""
    if not isinstance(entry, str) or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*(\.\*)?", entry):
        return f"{entry!r} is not a dotted name"
    if any(p.startswith("__") for p in entry.split(".")) and entry != "__future__" and not entry.startswith("__future__."):
        return f"{entry!r}: double-underscore names can't be allowed"
    if entry.endswith(".*"):
        if kind != "names":
            return f"{entry!r}: a wildcard belongs in names"
        mod = entry[:-2]
        if mod.split(".")[0] not in sys.stdlib_module_names:
            return (f"{entry!r}: `.*` is for standard-library modules only (read at load); list the names of "
                    "a third-party module one by one")
        try:
            importlib.import_module(mod)
        except Exception as e:  # noqa: BLE001 - say which entry is broken
            return f"{entry!r}: cannot import {mod} ({type(e).__name__})"
    return None


# -- the checks ---------------------------------------------------------------------------------
@dataclass
class _Hit:
    node: Node
    detail: str


_BUILTIN_NAMES = frozenset(dir(builtins))
_SKIP_PARENTS = ("dotted_name", "aliased_import", "parameters", "default_parameter", "typed_parameter",
                 "typed_default_parameter", "lambda_parameters")


_TORCH_LIBRARY_RE = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)")


def own_ops(m: ModuleModel) -> set[str]:
    """The torch ops the module registers itself, as "ns.op": torch.library.triton_op("ns::op"), and
    in a compiled extension's C++ source `m.def("op(...)")` inside TORCH_LIBRARY(ns, m). Ops, not
    namespaces: a namespace the module names (`triton_op("prims::x")`, load_inline(name="prims"))
    must not hand over the ops torch already has in it (torch.ops.prims.exp)."""
    out: set[str] = set()
    for call in m.nodes("call"):
        fn = call.child_by_field_name("function")
        if fn is None:
            continue
        args = call.child_by_field_name("arguments")
        pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
        if pos and "torch.library.triton_op" in m.qualnames(fn):
            v = string_value(pos[0])
            if v and "::" in v:
                out.add(".".join(v.split("::", 1)))
    for n in m.nodes("string"):
        v = string_value(n) if n.parent is None or n.parent.type != "concatenated_string" else None
        if not v or "TORCH_LIBRARY" not in v:
            continue
        for lib in _TORCH_LIBRARY_RE.finditer(v):
            ns, var = lib.group(1), lib.group(2)
            # the block that follows the macro: its `var.def("op...` declarations
            depth, i, body_start = 0, v.find("{", lib.end()), None
            for j in range(i, len(v)) if i >= 0 else ():
                if v[j] == "{":
                    depth += 1
                    body_start = body_start if body_start is not None else j
                elif v[j] == "}":
                    depth -= 1
                    if depth == 0:
                        for d in re.finditer(rf"\b{re.escape(var)}\s*\.\s*def\s*\(\s*\"(\w+)", v[body_start:j]):
                            out.add(f"{ns}.{d.group(1)}")
                        break
    return out


def _own_namespace(ns: str, own: set[str]) -> bool:
    return any(o.split(".", 1)[0] == ns for o in own)


def check_imports(m: ModuleModel, allow: Allowlist) -> list[_Hit]:
    out: list[_Hit] = []
    for imp in m.import_nodes:
        if imp.type == "future_import_statement":
            for c in imp.named_children:
                if c.type in ("dotted_name", "aliased_import"):
                    nm = text(c.child_by_field_name("name") if c.type == "aliased_import" else c)
                    if not allow.name(f"__future__.{nm}", set()):
                        out.append(_Hit(c, f"`from __future__ import {nm}` is not on the allowlist"))
            continue
        if imp.type == "import_statement":
            for c in imp.named_children:
                nm = text(c.child_by_field_name("name") if c.type == "aliased_import" else c)
                if not allow.module(nm, set()):
                    out.append(_Hit(c, f"`import {nm}`: module `{nm}` is not on the allowlist"))
            continue
        mod_node = imp.child_by_field_name("module_name")
        mod = text(mod_node)
        if mod_node is None or mod_node.type == "relative_import" or mod.startswith("."):
            out.append(_Hit(imp, f"relative import `from {mod} import ...`: the candidate is one module"))
            continue
        if not allow.module(mod, set()):
            out.append(_Hit(mod_node, f"`from {mod} import ...`: module `{mod}` is not on the allowlist"))
            continue
        for c in imp.named_children:
            if c == mod_node or c.type == "wildcard_import":
                continue
            nm = text(c.child_by_field_name("name") if c.type == "aliased_import" else c)
            q = f"{mod}.{nm}"
            if not (allow.module(q, set()) or allow.name(q, set())):
                out.append(_Hit(c, f"`from {mod} import {nm}`: `{q}` is not on the allowlist"))
    return out


def _chain_roots_re(m: ModuleModel) -> "re.Pattern[bytes] | None":
    names = sorted(n for n, qs in m.aliases.items() if any(not q.startswith("builtins.") for q in qs))
    if not names:
        return None
    return re.compile(rb"(?<![\w.])(" + b"|".join(re.escape(x.encode()) for x in names) + rb")\b")


def _judge_chain(q: str, allow: Allowlist, own_ns: set[str], bare: bool) -> str | None:
    """Why the dotted name `q` (what a chain resolves to) is not allowed, or None. `bare`: the chain
    is used as a value (not followed by a call)."""
    head = q.split("()")[0]
    parts = head.split(".")
    if not allow.module(parts[0], own_ns):
        return None if parts[0] == "" else f"`{head}`: `{parts[0]}` is not an allowed module"
    for i in range(1, len(parts) + 1):
        pre = ".".join(parts[:i])
        if i == len(parts):
            if allow.module(pre, own_ns):
                if bare and "()" not in q:
                    return f"module `{pre}` used as a value: write `{pre}.<name>` where you need it"
                return None if "()" not in q or allow.name(pre, own_ns) else f"`{pre}` is called"
            return None if allow.name(pre, own_ns) else f"`{pre}` is not on the allowlist"
        if allow.module(pre, own_ns):
            continue
        if allow.name(pre, own_ns):
            return None  # attributes of a value from here on
        return f"`{pre}` is not on the allowlist"
    return None


def check_names(m: ModuleModel, allow: Allowlist) -> list[_Hit]:
    own_ns = own_ops(m)
    out: list[_Hit] = []
    rx = _chain_roots_re(m)
    seen: set[int] = set()
    import_spans = [(i.start_byte, i.end_byte) for i in m.import_nodes]
    if rx is not None:
        for mt in rx.finditer(m.source):
            if any(a <= mt.start(1) < b for a, b in import_spans):
                continue
            n = m.node_at(mt.start(1), mt.end(1))
            if n is None or n.type != "identifier":
                continue
            p = n.parent
            if p is None or p.type in _SKIP_PARENTS:
                continue
            if p.type == "keyword_argument" and p.child_by_field_name("name") == n:
                continue
            if p.type == "assignment" and p.child_by_field_name("left") == n:
                continue  # `libdevice = None`: rebinding the name is no use of the module
            # the binding of an alias itself (`T = torch` is judged where T is used, and here)
            while p is not None and p.type == "attribute" and p.child_by_field_name("object") == n:
                n, p = p, p.parent
            if n.id in seen:
                continue
            seen.add(n.id)
            bare = not (p is not None and p.type == "call" and p.child_by_field_name("function") == n)
            for q in m.qualnames(n):
                why = _judge_chain(q, allow, own_ns, bare)
                if why:
                    out.append(_Hit(n, why))
                    break
    out += check_annotations(m)
    out += check_attribute_writes(m)
    out += check_private_reads(m, allow, own_ns)
    out += check_reaching_calls(m)
    # builtins: allowed by name; any other builtin that isn't rebound by the module is a violation
    bad = sorted(_BUILTIN_NAMES - SAFE_BUILTINS, key=len, reverse=True)
    brx = _bad_builtins_re(tuple(bad))
    for mt in brx.finditer(m.source):
        n = m.node_at(mt.start(1), mt.end(1))
        if n is None or n.type != "identifier" or n.id in seen:
            continue
        if not any(q.startswith("builtins.") for q in m.qualnames(n)):
            continue  # an attribute name, a parameter, or a name the module binds itself
        seen.add(n.id)
        out.append(_Hit(n, f"builtin `{text(n)}` is not on the allowlist"))
    return out


# What a type annotation may be made of. typing.get_type_hints and torch.library's schema inference
# (triton_op) eval() string annotations in the module's globals, so a string annotation, or a name
# bound to a string, is code that runs. An annotation is allowed when it is a plain type expression
# (names, dotted names, subscripts, `|`, None, ...), and so is any string in it, any module-level
# name it uses (followed to what it is bound to) - an allowlist of forms, not a list of payloads.
_TYPE_AST = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List, ast.Load, ast.Constant,
             ast.BitOr)


def _plain_type(src: str, m: ModuleModel, depth: int = 0) -> str | None:
    """Why the annotation text `src` is not a plain type expression, or None."""
    if depth > 4:
        return "nested too deeply"
    try:
        tree = ast.parse(src.strip(), mode="eval")
    except SyntaxError:
        return "not an expression"
    for n in ast.walk(tree):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
            continue
        if not isinstance(n, _TYPE_AST):
            return f"`{type(n).__name__.lower()}` is not part of a type"
        if isinstance(n, ast.Name) and n.id.startswith("__") or isinstance(n, ast.Attribute) and n.attr.startswith("__"):
            return "double-underscore name"
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            why = _plain_type(n.value, m, depth + 1)
            if why:
                return f"string {n.value[:40]!r}: {why}"
        elif isinstance(n, ast.Constant) and not (n.value is None or n.value is Ellipsis or isinstance(n.value, (int, bool))):
            return f"constant {n.value!r}"
        if isinstance(n, ast.Name) and n.id in m.values and n.id not in m.classes:
            # a module-level `NAME = <expr>`: what it is bound to is what gets evaluated
            for fn in m.values[n.id]:
                right = fn.node.child_by_field_name("right")
                why = _plain_type(text(right), m, depth + 1) if right is not None else "unbound"
                if why:
                    return f"`{n.id}` is bound to something that is not a type ({why})"
    return None


def check_annotations(m: ModuleModel) -> list[_Hit]:
    out: list[_Hit] = []
    for n in _type_nodes(m.root):
        why = _plain_type(text(n), m)
        if why:
            out.append(_Hit(n, f"annotation `{text(n)[:60]}` is not a plain type ({why}); typing and "
                               "torch.library evaluate annotations as code"))
    return out


# Attribute writes only on what the module owns: its classes, `self`/`cls` in their methods, and
# names bound to an instance of them. Anything else is somebody else's object: a torch class reached
# through a list (`setattr(_CLASSES[0], "detach", f)`), or the output tensor itself (`y.detach = f`:
# an instance attribute shadows the method, and the harness's own `.detach()` ran the deferred work).
def check_attribute_writes(m: ModuleModel) -> list[_Hit]:
    out: list[_Hit] = []
    own = set(m.classes)
    instances = {text(a.child_by_field_name("left")) for a in m.nodes("assignment")
                 if a.child_by_field_name("left") is not None and a.child_by_field_name("left").type == "identifier"
                 and _constructs_own(a.child_by_field_name("right"), own)}
    targets: list[tuple[Node, Node]] = []   # (the object written to, the node to report)
    for kind in ("assignment",):
        for a in m.nodes(kind):
            for t in _write_targets(a.child_by_field_name("left")):
                targets.append((t.child_by_field_name("object"), t))
    for n in _walk_types(m.root, ("augmented_assignment", "delete_statement")):
        for t in _write_targets(n.child_by_field_name("left") if n.type == "augmented_assignment" else n):
            targets.append((t.child_by_field_name("object"), t))
    for call in m.nodes("call"):
        fn = call.child_by_field_name("function")
        if fn is not None and m.qualnames(fn) & {"builtins.setattr", "builtins.delattr"}:
            args = call.child_by_field_name("arguments")
            pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
            if pos:
                targets.append((pos[0], call))
    for obj, report in targets:
        if obj is not None and not _owned(m, obj, own, instances):
            out.append(_Hit(report, f"`{text(report)[:60]}` writes an attribute of an object the module does not own "
                                    "(only its own classes, `self` and instances of them)"))
    return out


def check_private_reads(m: ModuleModel, allow: Allowlist | None = None, own_ns: set[str] = frozenset()) -> list[_Hit]:
    """A `_private` attribute is read only where the module defines that name itself (`self._impl`,
    a `_helper` method): past an allowed name attributes are those of a value and are not judged,
    and a private one of somebody else's object (`typing.ForwardRef(s)._evaluate(...)`, a storage's
    `_share_filename_cpu_`, `torch.Tensor._make_subclass`) is an internal API with no place in a
    kernel. (`getattr(x, "_name")` reads the same: the guard checks the attribute spelling of it.)"""
    defined: set[str] = set(m.functions) | set(m.methods) | set(m.nested) | set(m.classes) | set(m.module_bindings)
    for a in m.nodes("assignment"):
        for t in _write_targets(a.child_by_field_name("left")):
            defined.add(text(t.child_by_field_name("attribute")))
    for n in _walk_types(m.root, ("identifier",)):
        p = n.parent
        if p is not None and p.type in ("parameters", "default_parameter", "typed_parameter",
                                        "typed_default_parameter", "keyword_argument"):
            defined.add(text(n))
    out: list[_Hit] = []
    for n in _walk_types(m.root, ("attribute",)):
        name = text(n.child_by_field_name("attribute"))
        if not name.startswith("_") or name.startswith("__") or name in defined:
            continue
        root = n
        while root.type == "attribute":
            root = root.child_by_field_name("object")
        if root.type == "identifier" and text(root) in m.aliases:
            # A chain from an import: the names check judges it up to the first allowed name that is no
            # module (torch._C is refused there); past it (torch.Tensor._make_subclass) it is a value's.
            if allow is None or not any(_private_past_allowed(q, allow, own_ns) for q in m.qualnames(n)):
                continue
        out.append(_Hit(n, f"`{text(n)[:60]}` reads `{name}`, a private attribute of an object the module does "
                           "not define"))
    return out


def _private_past_allowed(q: str, allow: Allowlist, own_ns: set[str]) -> bool:
    parts = q.split("()")[0].split(".")
    for i in range(1, len(parts)):
        pre = ".".join(parts[:i])
        if allow.module(pre, own_ns):
            continue
        return allow.name(pre, own_ns) and parts[-1].startswith("_")
    return False


# Calls that make an object claim another module, or build classes from data: refused whatever
# they are called on (`module=` on enum's functional API or anything a partial hands it to; the
# functional API itself, whose names= can be any mapping). A kernel writes an enum with class syntax.
_CLAIMING_KEYWORDS = frozenset({"module", "qualname"})
_ENUM_CLASSES = frozenset(f"enum.{n}" for n in ("Enum", "IntEnum", "Flag", "IntFlag", "StrEnum"))
# Builtins that reach any attribute of any object: only ever called, with a literal name (dsl.py's
# dynamic-lookup), so every rule reads them as the attribute spelling; as a value
# (`functools.reduce(getattr, [...], obj)`, `map(setattr, ...)`) they would take computed names.
_LOOKUP_BUILTINS = frozenset({"builtins.getattr", "builtins.setattr", "builtins.hasattr", "builtins.delattr"})
_LOOKUP_RE = re.compile(rb"(?<![\w.])(?:getattr|setattr|hasattr|delattr)\b")


def check_reaching_calls(m: ModuleModel) -> list[_Hit]:
    out: list[_Hit] = []
    for call in m.nodes("call"):
        fn = call.child_by_field_name("function")
        args = call.child_by_field_name("arguments")
        for a in (args.named_children if args is not None and args.type == "argument_list" else []):
            if a.type == "keyword_argument" and text(a.child_by_field_name("name")) in _CLAIMING_KEYWORDS:
                out.append(_Hit(a, f"keyword `{text(a.child_by_field_name('name'))}=` makes an object claim another "
                                   "module or name (enum's functional API, make_dataclass, namedtuple)"))
            elif any(q in _ENUM_CLASSES for q in m.qualnames(a)) and not (
                    fn is not None and m.qualnames(fn) & {"builtins.isinstance", "builtins.issubclass"}):
                out.append(_Hit(a, f"`{text(a)}` handed to a call: write an enum with class syntax"))
        if fn is not None and m.qualnames(fn) & _ENUM_CLASSES:
            out.append(_Hit(call, f"`{text(fn)}(...)`: enum's functional API builds a class from data; write an "
                                  "enum with class syntax (`class Mode(enum.Enum): ...`)"))
    for mt in _LOOKUP_RE.finditer(m.source):  # (a regex, not a walk of the tree: the check's cost)
        n = m.node_at(mt.start(), mt.end())
        if n is None or n.type != "identifier" or not (m.qualnames(n) & _LOOKUP_BUILTINS):
            continue
        p = n.parent
        if p is not None and p.type == "call" and p.child_by_field_name("function") == n:
            continue
        out.append(_Hit(n, f"builtin `{text(n)}` used as a value: call it, with a literal attribute name"))
    return out


def _constructs_own(e: Node | None, own: set[str]) -> bool:
    if e is None or e.type != "call":
        return False
    fn = e.child_by_field_name("function")
    return fn is not None and fn.type == "identifier" and text(fn) in own


def _write_targets(n: Node | None) -> list[Node]:
    if n is None:
        return []
    if n.type == "attribute":
        return [n]
    if n.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple", "list",
                  "delete_statement", "parenthesized_expression"):
        return [t for c in n.named_children for t in _write_targets(c)]
    return []


def _walk_types(root: Node, kinds: tuple[str, ...]) -> list[Node]:
    out, todo = [], [root]
    while todo:
        n = todo.pop()
        if n.type in kinds:
            out.append(n)
        todo.extend(n.children)
    return out


def _owned(m: ModuleModel, obj: Node, own: set[str], instances: set[str]) -> bool:
    r = obj
    while r.type in ("attribute", "subscript"):
        r = r.child_by_field_name("object" if r.type == "attribute" else "value")
    if r.type == "call":
        return _constructs_own(r, own)
    if r.type != "identifier":
        return False
    name = text(r)
    if name in own or name in instances:
        return True
    fn_node = r.parent
    while fn_node is not None:  # `self`/`cls`: the first parameter of a method, closures inside it too
        if fn_node.type == "function_definition":
            fn = m.function_of(fn_node)
            params = fn_node.child_by_field_name("parameters")
            first = next((p for p in (params.named_children if params is not None else [])), None)
            if fn is not None and fn.cls and first is not None and first.type == "identifier" and text(first) == name:
                return True
        fn_node = fn_node.parent
    return False


def _type_nodes(root: Node) -> list[Node]:
    out, todo = [], [root]
    while todo:
        n = todo.pop()
        if n.type == "type":
            out.append(n)
            continue
        todo.extend(n.children)
    return out


@lru_cache(maxsize=4)
def _bad_builtins_re(names: tuple[str, ...]) -> "re.Pattern[bytes]":
    return re.compile(rb"(?<![\w.])(" + b"|".join(re.escape(x.encode()) for x in names) + rb")(?!\w)")


_DUNDER_RE = re.compile(rb"__\w+__")
_LOOKUPS = {"builtins.getattr", "builtins.setattr", "builtins.hasattr", "builtins.delattr"}


def check_dunder(m: ModuleModel) -> list[_Hit]:
    out: list[_Hit] = []
    seen: set[int] = set()
    for mt in _DUNDER_RE.finditer(m.source):
        n = m.node_at(mt.start(), mt.end())
        if n is None or n.type != "identifier" or n.id in seen:
            continue
        seen.add(n.id)
        nm = text(n)
        p = n.parent
        if nm == "__future__" and p is not None and p.type == "dotted_name":
            continue
        if p is not None and p.type == "function_definition" and p.child_by_field_name("name") == n \
                and nm in _DUNDER_DEFS and m.function_of(p) is not None and m.function_of(p).cls:
            continue
        if nm == "__init__" and p is not None and p.type == "attribute" and p.child_by_field_name("attribute") == n:
            obj = p.child_by_field_name("object")
            if obj is not None and obj.type == "call" and text(obj.child_by_field_name("function")) == "super":
                continue
        if nm == "__name__" and _in_main_test(n):
            out.append(_Hit(n, "an `if __name__ == \"__main__\":` block: the evaluator imports the module, so the "
                               "block is dead code or hidden code; remove it (warpsmith tests the kernel)"))
            continue
        out.append(_Hit(n, f"`{nm}`"))
    # getattr(x, "__dict__") / setattr(m, "__na" "me__", ...): the name in a string
    for call in m.nodes("call"):
        fn = call.child_by_field_name("function")
        if fn is None or not (m.qualnames(fn) & _LOOKUPS):
            continue
        args = call.child_by_field_name("arguments")
        pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
        v = string_value(pos[1]) if len(pos) >= 2 else None
        if v is not None and v.startswith("__"):
            out.append(_Hit(call, f"`{text(fn)}` of `{v}`"))
    return out


def _in_main_test(n: Node) -> bool:
    p = n.parent
    return p is not None and p.type == "comparison_operator" and "__main__" in text(p)


def run(check_id: str, m: ModuleModel, allow: Allowlist) -> list[_Hit]:
    if check_id == "allowed-imports":
        return check_imports(m, allow)
    if check_id == "allowed-names":
        return check_names(m, allow)
    return check_dunder(m)

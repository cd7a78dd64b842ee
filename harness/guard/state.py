"""The static check `no-module-state`: nothing on the entry path keeps state across calls.

A kernel whose result depends on how often it was called (a module-level call counter that
changes the arithmetic after the checked calls) is correct on what is tested and wrong on what
users pass. So, on the host entry path (dsl.py), writes to objects that outlive a call are refused,
whatever they are spelled as: `global`/`nonlocal`, item, attribute and augmented assignment or
`del` into a module-level object, a function's or a class's attribute, `self`/`cls` outside
`__init__` (when the attribute is read back), a mutating method call (`.append`, `.update`,
`next(it)`, ...) on a module-level container, writes through a local that names one
(`c = _CACHE; c[k] = v`), into a mutable default argument, or into what a cached function
returned; a module-level iterator (consumed by use); a functools cache on a function whose result
is data or a mutable object. Module-level code that runs once at import (constant tables, kernel
definitions) is not the entry path and stays fine.

Three patterns of honest launchers are allowed, because nothing read back can change a result:
  * a memo cache: a module-level dict bound to `{}`, used on the path only as `C[key] = value`,
    `C.setdefault(key, value)`, `C.get(key)`, `C[key]` and `key in C`, whose values settle: each
    store is a compiled kernel or a config (constants, shapes, dtypes and devices: an input's
    metadata; `kernel.warmup(...)`, `cute.compile(...)`; a scratch allocation; records of those) or
    what the cache held stored back unchanged, and a constant goes in only on a miss (`if v is None:`,
    `if k not in C:`). Not an input, not a tensor computed from inputs, and nothing computed from
    what an unsettled cache held (`C[k] = C.get(k, 0) + 1` is a counter; `0 if C.get(k) else 1`
    toggles). Settled caches are found as a fixpoint: reading one is as good as a constant.
  * a value built once under `global` the same way (`if _EXT is None: _EXT = load_inline(...)`).
  * a write-only diagnostic: a module-level dict or list, or an attribute of the launcher, the path
    only writes into (stores, `+=`, `.update(...)`, `.append(...)` whose result is unused), never reads.
What stays open (a first line, not a proof; docs/threat-model.md): values a kernel keeps in device
memory across calls (a cached scratch buffer is handed to it), control flow that does not enclose
a store (an early return decided on a read), and contrived evolutions through what a cache hands back unchanged (a
tuple nested one level deeper each call). Timed outputs are rechecked by the parent.
"""
from __future__ import annotations

import re
from typing import Any, Callable

from tree_sitter import Node

from .pyparse import Function, WriteSite, _binders, _module_scope, text

_META_ATTRS = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "layout", "itemsize", "type", "index"})
_META_METHODS = frozenset({"stride", "size", "numel", "dim", "is_contiguous", "element_size", "nelement", "get_device"})
_READ_METHODS = frozenset({"get", "keys", "values", "items", "copy", "count", "index"})
_MUTATING = frozenset({"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "remove",
                       "discard", "add", "sort", "reverse", "send", "put", "write", "fill_", "zero_", "copy_",
                       "__next__", "__setitem__", "__delitem__", "__iadd__"})
_WRITE_ONLY_METHODS = frozenset({"update", "append", "extend", "insert", "add", "clear", "discard", "remove"})
_CONTAINER_CALLS = frozenset({"builtins.dict", "builtins.list", "builtins.set", "builtins.bytearray"})
_RECORD_CALLS = frozenset({"builtins.dict", "builtins.tuple", "builtins.list", "triton.Config"})
_ITERATOR_CALLS = frozenset({"builtins.iter", "builtins.map", "builtins.filter", "builtins.zip", "builtins.enumerate",
                             "builtins.reversed"})
_CACHES = frozenset({"functools.lru_cache", "functools.cache"})
_INIT = frozenset({"__init__", "__post_init__"})
_SCOPES = ("function_definition", "lambda")
_IMMUTABLE_DEFAULTS = ("integer", "float", "string", "true", "false", "none", "concatenated_string", "unary_operator")
# What a value is, for the memo rule (a "Value"): None (data, an input, a tensor computed from
# inputs, a mutable object, or something computed from what an unsettled cache held), else the set
# of memo caches whose content it passes on unchanged (CONST, empty: a compiled kernel or a config:
# constants, an input's metadata, compiled objects, allocations, records of those).
CONST: frozenset[str] = frozenset()
_TORCH_ALLOC = frozenset(f"torch.{n}" for n in ("empty", "zeros", "ones", "full", "empty_strided", "empty_like",
                                                "zeros_like", "ones_like", "full_like", "arange"))


def _join(*vs):
    out: set[str] = set()
    for v in vs:
        if v is None:
            return None
        out |= v
    return frozenset(out)


def _computed(v):
    """A value computed from `v` (an operator, a call): a pass-on of a cache read stops being one."""
    return None if v is None or v else CONST


def _scope_of(n: Node) -> Node | None:
    """The innermost def or lambda holding `n` (None: module-level code, run once at import)."""
    p = n.parent
    while p is not None and p.type not in _SCOPES:
        p = p.parent
    return p


def _params(scope: Node) -> dict[str, Node | None]:
    """A def's or lambda's parameter names -> their default value (None: no default)."""
    ps = scope.child_by_field_name("parameters")
    out: dict[str, Node | None] = {}
    for p in (ps.named_children if ps is not None else []):
        if p.type == "identifier":
            out[text(p)] = None
        elif p.type in ("default_parameter", "typed_default_parameter"):
            nm = p.child_by_field_name("name")
            if nm is not None:
                out[text(nm)] = p.child_by_field_name("value")
        elif p.type in ("typed_parameter", "list_splat_pattern", "dictionary_splat_pattern"):
            nm = next((c for c in p.named_children if c.type == "identifier"), None)
            if nm is not None:
                out[text(nm)] = None
    return out


class _State:
    def __init__(self, d: Any):  # a dsl.DslModel (this module is dsl.py's, imported by it)
        self.d, self.m = d, d.m
        m = self.m
        imported = {m.text(b) for st in m.import_nodes for b in _binders(st)}
        self.module_binds: dict[str, list[WriteSite]] = {}
        for w in m.write_sites():
            if w.root is not None and w.kind == "bind" and _scope_of(w.root) is None and _module_scope(w.root):
                self.module_binds.setdefault(m.text(w.root), []).append(w)
        self.state = (set(m.module_bindings) | set(self.module_binds)) - imported
        self.containers = {n for n in self.state if self._bound_to(n, self._is_container)}
        self.iterators = {n for n in self.state if self._bound_to(n, self._is_iterator, every=False)}
        self.path = [f for f in d.host_path() if not f.stmt]
        self._locals: dict[int, dict[str, list[tuple[str, Node | None]]]] = {}
        self._binds_by_scope: dict[int, list[WriteSite]] | None = None
        self.memo: set[str] = set()        # module dicts used only as memo caches
        self.lazy: set[str] = set()        # module names the path rebinds under `global`
        self.stable: set[str] = set()      # memo caches whose value per key cannot change after it is set

    # -- what module-level names are bound to --------------------------------------------------
    def _values(self, name: str) -> list[Node | None]:
        out: list[Node | None] = []
        for w in self.module_binds.get(name, []):
            if w.node.type == "assignment" and w.node.child_by_field_name("left") == w.root:
                out.append(w.node.child_by_field_name("right"))
            else:
                out.append(None)  # bound some other way: unpacking, a loop, with-as
        return out

    def _bound_to(self, name: str, pred, every: bool = True) -> bool:
        vals = self._values(name)
        hits = [v is not None and pred(v) for v in vals]
        return bool(vals) and (all(hits) if every else any(hits))

    def _is_container(self, v: Node) -> bool:
        if v.type in ("dictionary", "list", "set", "dictionary_comprehension", "list_comprehension", "set_comprehension"):
            return True
        fn = v.child_by_field_name("function") if v.type == "call" else None
        return fn is not None and bool(self.m.qualnames(fn) & _CONTAINER_CALLS)

    def _is_iterator(self, v: Node) -> bool:
        if v.type == "generator_expression":
            return True
        fn = v.child_by_field_name("function") if v.type == "call" else None
        qs = self.m.qualnames(fn) if fn is not None else frozenset()
        return bool(qs & _ITERATOR_CALLS) or any(q.startswith("itertools.") for q in qs)

    def _empty_dict(self, name: str) -> bool:
        vals = self._values(name)
        if len(vals) != 1 or vals[0] is None:
            return False
        v = vals[0]
        if v.type == "dictionary":
            return not v.named_children
        fn = v.child_by_field_name("function") if v.type == "call" else None
        args = v.child_by_field_name("arguments") if v.type == "call" else None
        return fn is not None and "builtins.dict" in self.m.qualnames(fn) and args is not None and not args.named_children

    # -- a scope's own names ---------------------------------------------------------------------
    def locals_of(self, scope: Node) -> dict[str, list[tuple[str, Node | None]]]:
        """name -> how the scope binds it: ("value", expr) | ("iter", iterable) | ("param", default)
        | ("other", None) (augmented, unpacked, with-as, ...)."""
        hit = self._locals.get(scope.id)
        if hit is not None:
            return hit
        out: dict[str, list[tuple[str, Node | None]]] = {}
        for nm, default in _params(scope).items():
            out.setdefault(nm, []).append(("param", default))
        if self._binds_by_scope is None:
            self._binds_by_scope = {}
            for w in self.m.write_sites():
                sc = _scope_of(w.root) if w.kind == "bind" and w.root is not None else None
                if sc is not None:
                    self._binds_by_scope.setdefault(sc.id, []).append(w)
        for w in self._binds_by_scope.get(scope.id, []):
            nm, node = self.m.text(w.root), w.node
            if node.type == "assignment" and node.child_by_field_name("left") == w.root:
                out.setdefault(nm, []).append(("value", node.child_by_field_name("right")))
            elif node.type in ("for_statement", "for_in_clause"):
                left = node.child_by_field_name("left")
                out.setdefault(nm, []).append(("iter" if left == w.root else "iter-unpacked", node.child_by_field_name("right")))
            elif node.type == "assignment":
                out.setdefault(nm, []).append(("unpacked", node.child_by_field_name("right")))
            elif node.type == "named_expression":
                out.setdefault(nm, []).append(("value", node.child_by_field_name("value")))
            else:
                out.setdefault(nm, []).append(("other", None))
        for g in self.m.nodes_in("global", scope):
            if _scope_of(g) == scope:
                for c in g.named_children:
                    out.pop(text(c), None)
        self._locals[scope.id] = out
        return out

    def lookup(self, ident: Node) -> tuple[Node | None, list[tuple[str, Node | None]] | None]:
        """(the scope binding `ident`, its bindings there), or (None, None): a module-level name."""
        name = text(ident)
        s = _scope_of(ident)
        while s is not None:
            b = self.locals_of(s).get(name)
            if b is not None:
                return s, b
            s = _scope_of(s)
        return None, None

    # -- what a value is -------------------------------------------------------------------------
    def classify(self, e: Node | None, shape_ctx: bool = False, cached_params: bool = False,
                 seen: frozenset[int] = frozenset()):
        """The Value of expression `e` (see Value). `shape_ctx`: an argument of an allocation, where an
        input is only a size or a device. `cached_params`: in a functools-cached function, whose
        parameters are its cache key."""
        if e is None or e.id in seen or len(seen) > 60:
            return None
        seen = seen | {e.id}

        def c(x, shape: bool = shape_ctx):
            return self.classify(x, shape, cached_params, seen)

        t = e.type
        if t in ("integer", "float", "true", "false", "none", "ellipsis", "lambda"):
            return CONST
        if t in ("string", "concatenated_string"):
            return _computed(_join(CONST, *[c(i.named_children[0]) for i in _interpolations(e)]))
        if t == "parenthesized_expression":
            return c(e.named_children[0]) if e.named_children else CONST
        if t == "assignment":  # `ws = C[k] = value`: ws is the value
            return c(e.child_by_field_name("right"))
        if t in ("tuple", "list", "expression_list", "dictionary", "pair", "set", "keyword_argument"):
            kids = [k for k in e.named_children if not (t == "keyword_argument" and k == e.child_by_field_name("name"))]
            return _join(CONST, *[c(k) for k in kids])
        if t == "conditional_expression":
            parts = e.named_children
            if len(parts) != 3:
                return None
            return self._choice(parts[1], c(parts[0]), c(parts[2]), cached_params, seen)
        if t == "boolean_operator":
            return _join(c(e.child_by_field_name("left")), c(e.child_by_field_name("right")))
        if t in ("binary_operator", "unary_operator", "comparison_operator", "not_operator"):
            return _computed(_join(CONST, *[c(k) for k in e.named_children]))
        if t == "identifier":
            return self._classify_name(e, shape_ctx, cached_params, seen)
        if t == "attribute":
            obj = e.child_by_field_name("object")
            if text(e.child_by_field_name("attribute")) in _META_ATTRS and self._is_param(obj):
                return CONST  # an input's metadata
            qs = self.m.qualnames(e)
            if qs and all(not q.startswith("builtins.") for q in qs):
                return CONST  # an imported name (tl.float32, torch.bfloat16)
            return c(obj)
        if t == "subscript":
            return _join(c(e.child_by_field_name("value")), *[_computed(c(s)) for s in e.children_by_field_name("subscript")])
        if t == "call":
            return self._classify_call(e, shape_ctx, cached_params, seen)
        return None

    def _is_param(self, n: Node | None) -> bool:
        if n is None or n.type != "identifier":
            return False
        _, binds = self.lookup(n)
        return binds is not None and any(k == "param" for k, _ in binds)

    def _choice(self, cond: Node, a, b, cached_params: bool, seen):
        """`a if cond else b`: a choice made on what an unsettled cache held can toggle from call to
        call, unless it is a hit test whose hit branch passes the read on (then it settles)."""
        k = self.hit_test(cond, cached_params, seen)
        if k is None:
            return None
        if not k:  # a plain condition
            return _join(a, b)
        if a is None or b is None or not ((a and a <= k) or (b and b <= k)):
            return None  # both branches constants: `0 if C.get(k) else 1` toggles
        return _join(a, b)

    def hit_test(self, cond: Node | None, cached_params: bool = False, seen=frozenset()):
        """The caches a condition tests for a hit (`x`, `not x`, `x is None`, `k in C`, with x a read),
        CONST for a plain condition, None for a condition computed from a read (it can toggle)."""
        if cond is None:
            return CONST
        t = cond.type
        if t == "parenthesized_expression" and cond.named_children:
            return self.hit_test(cond.named_children[0], cached_params, seen)
        if t == "not_operator":
            return self.hit_test(cond.child_by_field_name("argument"), cached_params, seen)
        if t == "boolean_operator":
            return _join(self.hit_test(cond.child_by_field_name("left"), cached_params, seen),
                         self.hit_test(cond.child_by_field_name("right"), cached_params, seen))
        if t == "comparison_operator":
            ops = [o.type for o in cond.children if not o.is_named]
            kids = cond.named_children
            if len(kids) == 2 and ops in (["is"], ["is not"]) and kids[1].type == "none":
                return self.classify(kids[0], cached_params=cached_params, seen=seen)
            if len(kids) == 2 and ops in (["in"], ["not in"]) and kids[1].type == "identifier" \
                    and self.lookup(kids[1])[1] is None and text(kids[1]) in self.memo:
                key = self.classify(kids[0], cached_params=cached_params, seen=seen)
                return None if key is None else (CONST if text(kids[1]) in self.stable else frozenset({text(kids[1])}))
        return self.classify(cond, cached_params=cached_params, seen=seen)

    def _classify_name(self, e: Node, shape_ctx: bool, cached_params: bool, seen):
        name = text(e)
        scope, binds = self.lookup(e)
        if binds is None:  # module level
            if name in self.containers or name in self.iterators:
                return None
            if name in self.lazy and name not in self.stable:
                return frozenset({name})  # a name the path rebinds (`global`): what it held
            return CONST  # constants, defs, classes, imports, compiled objects bound at import
        out = CONST
        for kind, v in binds:
            if kind == "param":
                k = CONST if (shape_ctx or cached_params) else None  # an input itself is data
            elif kind in ("value", "iter", "iter-unpacked", "unpacked"):
                k = self.classify(v, False, cached_params, seen)
            else:
                k = None
            out = _join(out, k)
        return out

    def _classify_call(self, e: Node, shape_ctx: bool, cached_params: bool, seen):
        fn = e.child_by_field_name("function")
        args = e.child_by_field_name("arguments")
        argv = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
        if fn is None:
            return None
        if self.d.is_handle(e):
            return CONST  # cute.compile(...), load_inline(...)
        if fn.type == "attribute":
            obj = fn.child_by_field_name("object")
            meth = text(fn.child_by_field_name("attribute"))
            if obj is not None and obj.type == "identifier" and self.lookup(obj)[1] is None and text(obj) in self.memo:
                if meth not in ("get", "setdefault"):
                    return None
                return CONST if text(obj) in self.stable else frozenset({text(obj)})
            if meth == "warmup" and self.d._is_kernel_ref(obj):
                return CONST  # a compiled Triton kernel
            if meth in _META_METHODS and self._is_param(obj):
                return CONST
        qs = self.m.qualnames(fn)
        alloc = bool(qs & _TORCH_ALLOC)

        def arg(a: Node):
            if a.type in ("list_splat", "dictionary_splat"):
                return None
            return self.classify(a.child_by_field_name("value") if a.type == "keyword_argument" else a,
                                 shape_ctx or alloc, cached_params, seen)

        vals = [arg(a) for a in argv]
        if alloc:
            return _computed(_join(CONST, *vals))  # fresh memory: its contents carry nothing
        if any(q.startswith("torch.") and not q.startswith("torch.cuda.") for q in qs):
            return None  # a tensor made from tensors: data, not a config
        if qs & _RECORD_CALLS:
            return _join(CONST, *vals)  # a record of what it holds
        own = fn.type == "identifier" and self.lookup(fn)[1] is None and (
            text(fn) in self.m.functions or text(fn) in self.m.classes)
        known = qs and all(q.startswith(("builtins.", "torch.cuda.")) or q.split(".")[0] in _PURE_ROOTS for q in qs)
        if own or known:
            return _computed(_join(CONST, *vals))  # deterministic in its arguments
        return None

    # -- the memo caches and write-only containers -------------------------------------------------
    def occurrences(self, name: str) -> list[Node]:
        """Identifier nodes of the module-level `name` in the path's functions (not module code)."""
        rx = re.compile(rb"(?<![\w.])" + re.escape(name.encode()) + rb"\b")
        out: list[Node] = []
        seen: set[int] = set()
        for f in self.path:
            for part in f.scanned:
                base = part.start_byte
                for mt in rx.finditer(self.m.body_bytes(part)):
                    n = self.m.node_at(base + mt.start(), base + mt.end())
                    if n is None or n.type != "identifier" or n.id in seen or _scope_of(n) is None:
                        continue
                    p = n.parent
                    if p is not None and p.type == "attribute" and p.child_by_field_name("attribute") == n:
                        continue
                    if p is not None and p.type == "keyword_argument" and p.child_by_field_name("name") == n:
                        continue
                    seen.add(n.id)
                    if self.lookup(n)[1] is None:
                        out.append(n)
        return out

    def _memo_form(self, n: Node) -> tuple[str, Node | None] | None:
        """How an occurrence of a cache is used: ("store", value node) for `C[k] = v` / `C.setdefault(k, v)`,
        ("read", None) for `C[k]`, `C.get(k)`, `k in C`; None for anything else."""
        p = n.parent
        if p is None:
            return None
        if p.type == "subscript" and p.child_by_field_name("value") == n:
            a = p.parent
            if a is not None and a.type == "assignment" and a.child_by_field_name("left") == p:
                v = a.child_by_field_name("right")
                while v is not None and v.type == "assignment":  # `ws = C[k] = value`
                    v = v.child_by_field_name("right")
                return "store", v
            if a is not None and a.type in ("augmented_assignment", "delete_statement", "pattern_list", "tuple_pattern",
                                            "for_statement", "list_pattern"):
                return None  # `C[k] += 1`, `del C[k]`, a target of unpacking
            return "read", None
        if p.type == "attribute" and p.child_by_field_name("object") == n:
            meth, call = text(p.child_by_field_name("attribute")), p.parent
            if call is None or call.type != "call" or meth not in ("get", "setdefault"):
                return None
            args = call.child_by_field_name("arguments")
            argv = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
            if meth == "get":
                return "read", None
            return ("store", argv[1]) if len(argv) == 2 else None
        if p.type == "comparison_operator" and len(p.named_children) == 2 and p.named_children[1] == n \
                and any(o.type in ("in", "not in") for o in p.children if not o.is_named):
            return "read", None
        return None

    def _store_ok(self, cache: str, store: Node, value: Node | None) -> bool:
        """A memo store settles: its value is a constant-like value or passes on what this cache held,
        and every condition it sits under is plain or a hit test of this cache, a constant stored
        only on a miss (a constant stored on a hit could toggle)."""
        v = self.classify(value)
        if v is None or not v <= {cache}:
            return False
        child, p = store, store.parent
        while p is not None and p.type not in _SCOPES:
            cond, miss_branch = None, None
            if p.type in ("if_statement", "elif_clause", "while_statement"):
                cond = p.child_by_field_name("condition")
                in_body = child == p.child_by_field_name("consequence") or child == p.child_by_field_name("body")
                miss_branch = in_body == _tests_miss(cond)
            elif p.type == "else_clause" and p.parent is not None and p.parent.type == "if_statement":
                cond = p.parent.child_by_field_name("condition")
                miss_branch = not _tests_miss(cond)
            elif p.type == "for_statement" and child == p.child_by_field_name("body"):
                cond, miss_branch = p.child_by_field_name("right"), False
            if cond is not None:
                k = self.hit_test(cond) if p.type != "for_statement" else self.classify(cond)
                if k is None or not k <= {cache}:
                    return False
                if k and not v and not miss_branch:
                    return False
            child, p = p, p.parent
        return True

    def prepare(self) -> "_State":
        dicts = {n for n in self.containers if self._empty_dict(n)}
        used = {n: self.occurrences(n) for n in self.containers}
        forms = {n: [self._memo_form(o) for o in used[n]] for n in dicts}
        self.memo = {n for n in dicts if all(f is not None for f in forms[n])}
        stores: dict[str, list[tuple[Node, Node | None]]] = {
            n: [(o.parent.parent, f[1]) for o, f in zip(used[n], forms[n]) if f is not None and f[0] == "store"]
            for n in self.memo}
        # A module-level name the path rebinds under `global` is a cache of one value: fine when it is
        # set like a memo store (`if _EXT is None: _EXT = load_inline(...)`), refused otherwise.
        spans = [(p.start_byte, p.end_byte) for f in self.path for p in f.scanned]
        self.lazy = set()
        for g in self.m.nodes("global"):
            if g.type == "global_statement" and any(a <= g.start_byte < b for a, b in spans) and _scope_of(g) is not None:
                self.lazy |= {text(c) for c in g.named_children if c.type == "identifier"}
        for name in self.lazy:
            ok, sites = True, []
            for w in self.m.write_sites():
                if w.root is None or text(w.root) != name or w.kind != "bind" or self.lookup(w.root)[1] is not None:
                    continue
                if _scope_of(w.root) is None:
                    continue  # module-level code: the name's binding at import
                if w.node.type == "assignment" and w.node.child_by_field_name("left") == w.root:
                    sites.append((w.node, w.node.child_by_field_name("right")))
                else:
                    ok = False  # `_N += 1`, a loop target, del
            stores[name] = sites if ok else [(None, None)]
        # Settled caches, a fixpoint: what one holds can't change once set, so reading it is as good as
        # a constant for the others (a compiled kernel chosen by a cached config).
        settled: set[str] = set()
        while True:
            self.stable = settled
            new = {n for n in (self.memo | self.lazy) - settled
                   if all(node is not None and self._store_ok(n, node, v) for node, v in stores[n])}
            if not new:
                break
            settled = settled | new
        self.stable = settled
        self.write_only = {n for n in self.containers - self.memo if used[n] and all(self._write_only_use(o) for o in used[n])}
        return self

    def attribute_read(self, name: str) -> bool:
        """Is an attribute `name` (of any object: over-approximate) read anywhere on the path, other
        than by the augmented assignment that writes it?"""
        rx = re.compile(rb"\.\s*" + re.escape(name.encode()) + rb"\b")
        for f in self.path:
            for part in f.scanned:
                base = part.start_byte
                for mt in rx.finditer(self.m.body_bytes(part)):
                    n = self.m.node_at(base + mt.end() - len(name), base + mt.end())
                    a = n.parent if n is not None else None
                    if a is None or a.type != "attribute" or a.child_by_field_name("attribute") != n:
                        continue
                    w = a.parent
                    if w is not None and w.type in ("assignment", "augmented_assignment") and w.child_by_field_name("left") == a:
                        continue
                    return True
        return False

    def _write_only_use(self, n: Node) -> bool:
        p = n.parent
        if p is None:
            return False
        if p.type in ("subscript", "attribute") and p.child_by_field_name("value" if p.type == "subscript" else "object") == n:
            a = p.parent
            if a is not None and a.type in ("assignment", "augmented_assignment") and a.child_by_field_name("left") == p:
                return True  # (`C[k] += 1` reads only what it writes)
            if a is not None and a.type == "delete_statement":
                return True
            if p.type == "attribute" and a is not None and a.type == "call" and \
                    text(p.child_by_field_name("attribute")) in _WRITE_ONLY_METHODS:
                return a.parent is not None and a.parent.type == "expression_statement"
        return False


_PURE_ROOTS = ("math", "triton", "functools", "itertools", "typing", "enum", "dataclasses", "cutlass")


def _tests_miss(cond: Node | None) -> bool:
    """Does `cond` hold on a miss (`x is None`, `not x`, `k not in C`)? (else on a hit: `x`, `k in C`)"""
    if cond is None:
        return False
    if cond.type == "parenthesized_expression" and cond.named_children:
        return _tests_miss(cond.named_children[0])
    if cond.type == "not_operator":
        return not _tests_miss(cond.child_by_field_name("argument"))
    if cond.type == "comparison_operator":
        ops = [o.type for o in cond.children if not o.is_named]
        return ops in (["is"], ["not in"])
    return False


def _interpolations(e: Node) -> list[Node]:
    return [k for k in e.named_children if k.type == "interpolation" and k.named_children]


def check_module_state(d: Any, finding: Callable[[Node, str], Any]) -> list:
    """Findings (made by `finding(node, detail)`) for the DslModel `d`'s entry path."""
    st = _State(d).prepare()
    m = st.m
    if not st.path:
        return []
    out: list = []
    spans = [(p.start_byte, p.end_byte) for f in st.path for p in f.scanned]

    def on_path(n: Node) -> bool:
        return any(a <= n.start_byte and n.end_byte <= b for a, b in spans) and _scope_of(n) is not None

    for g in m.nodes("global"):
        names = [text(c) for c in g.named_children if c.type == "identifier"]
        if on_path(g) and (g.type == "nonlocal_statement" or any(n not in st.stable for n in names)):
            out.append(finding(g, f"`{text(g)}`: a function on the entry path rebinds a name that outlives the call "
                                  "(set once, `if X is None: X = <compiled kernel or config>`, it is fine)"))
    for w in m.write_sites():
        if not on_path(w.node):
            continue
        why = _write_problem(st, w)
        if why:
            out.append(finding(w.node, why))
    for name in sorted(st.iterators):
        for n in st.occurrences(name):
            out.append(finding(n, f"`{name}` is a module-level iterator: every use on the entry path advances it"))
    for f in st.path:
        if f.node.type == "function_definition" and m.decorator_qualnames(f) & _CACHES:
            why = _cached_problem(st, f)
            if why:
                out.append(finding(f.node, why))
    return out


def _write_problem(st: _State, w: WriteSite) -> str:
    m = st.m
    what = text(w.node).split("\n")[0][:60]
    scope = _scope_of(w.node)
    if w.kind == "bind":
        return ""  # a local; a module name rebound needs `global`, refused on its own
    if w.kind == "call" and not (w.method in _MUTATING or (w.root is not None and text(w.root) in st.containers
                                                           and w.method not in _READ_METHODS)):
        return ""
    root = w.root
    if root is None:
        target = w.node.child_by_field_name("left") if w.node.type in ("assignment", "augmented_assignment") else w.node
        names = {text(n) for n in _identifiers(target)} if target is not None else set()
        return f"`{what}` writes into an object that may outlive the call" if names & st.state else ""
    name = text(root)
    rscope, binds = st.lookup(root)
    if binds is not None:  # a local or a parameter
        for kind, v in binds:
            if kind == "param" and v is not None and v.type not in _IMMUTABLE_DEFAULTS and not (
                    v.type == "tuple" and all(k.type in _IMMUTABLE_DEFAULTS for k in v.named_children)):
                return f"`{what}` writes into `{name}`, whose default value is made once and kept across calls"
        fn = m.function_of(rscope) if rscope is not None and rscope.type == "function_definition" else None
        params = list(_params(rscope)) if rscope is not None else []
        if fn is not None and fn.cls and params and params[0] == name and fn.name not in _INIT:
            attr = _first_attribute(w, root)
            if attr is not None and not st.attribute_read(attr):
                return ""  # written, never read on the path (a launch count kept for diagnostics)
            return (f"`{what}` writes `{name}`'s state outside __init__: an instance (or class) the entry reuses keeps it "
                    "across calls")
        if any(kind in ("value", "iter", "iter-unpacked", "unpacked") and v is not None and _aliases_state(st, v)
               for kind, v in binds):
            return f"`{what}` writes through `{name}`, which names an object that outlives the call"
        return ""
    if name not in st.state:
        return ""
    if name in st.stable or name in st.write_only:
        return ""  # a memo cache of compiled kernels/configs, or a diagnostic the path never reads
    if name in st.memo:
        return (f"`{what}` stores into the cache `{name}` something other than a compiled kernel or a config set "
                "once per key: a tensor made from inputs, an input, a value computed from what a cache held, or a "
                "constant stored on a hit")
    if name in st.containers:
        return (f"`{what}` writes into the module-level `{name}` on the entry path: state kept across calls (a cache is "
                f"fine only as `{name}[key] = compiled kernel or config`, `.get`, `in`)")
    return f"`{what}` writes into the module-level `{name}` on the entry path: state kept across calls"


def _first_attribute(w: WriteSite, root: Node) -> str | None:
    """`x` of a write to `self.x` (`self.x = v`, `self.x += 1`, `self.x[k] = v`, `self.x.append(v)`)."""
    p = root.parent
    if p is not None and p.type == "attribute" and p.child_by_field_name("object") == root:
        return text(p.child_by_field_name("attribute"))
    return None


def _aliases_state(st: _State, v: Node, depth: int = 0) -> bool:
    """May the value `v` be an object that outlives the call (a module container, part of one, what
    a cached function returned)?"""
    if depth > 8:
        return True
    t = v.type
    if t == "identifier":
        _, binds = st.lookup(v)
        if binds is None:
            return text(v) in st.containers or text(v) in st.iterators
        return False  # (locals are judged where they are bound)
    if t in ("attribute", "subscript"):
        return _aliases_state(st, v.child_by_field_name("object" if t == "attribute" else "value"), depth + 1)
    if t == "call":
        fn = v.child_by_field_name("function")
        if fn is None:
            return False
        if fn.type == "attribute":
            return _aliases_state(st, fn.child_by_field_name("object"), depth + 1)
        if fn.type == "identifier" and st.lookup(fn)[1] is None:
            return any(st.m.decorator_qualnames(f) & _CACHES for f in st.m.functions.get(text(fn), []))
        return False
    if t in ("parenthesized_expression", "conditional_expression", "boolean_operator"):
        return any(_aliases_state(st, k, depth + 1) for k in v.named_children)
    return False


def _cached_problem(st: _State, f: Function) -> str:
    for r in st.m.nodes_in("return", f.node):
        if _scope_of(r) != f.node or not r.named_children:
            continue
        v = r.named_children[0]
        if v.type in ("dictionary", "list", "set") or st.classify(v, cached_params=True) is None \
                or (v.type == "identifier" and st.lookup(v)[1] and any(k == "param" for k, _ in st.lookup(v)[1] or [])):
            return (f"`{f.name}` is cached ({', '.join(sorted(st.m.decorator_qualnames(f) & _CACHES))}) and returns "
                    f"`{text(v)[:40]}`: a result kept across calls (a cached function may return a compiled kernel or a config)")
    return ""


def _identifiers(n: Node) -> list[Node]:
    out, todo = [], [n]
    while todo:
        x = todo.pop()
        if x.type == "identifier":
            out.append(x)
        todo.extend(x.named_children)
    return out


__all__ = ["check_module_state"]

"""A read-only model of one candidate module, built from its tree-sitter parse.

What the guard needs to know about a candidate without running it: which names are imports and
what they stand for (``import torch as t``, ``from torch import softmax as s``, ``f = torch.exp``),
which functions exist and which of them the entry can reach (a call graph within the module), and
the decorators of each function. Everything is flow-insensitive on purpose: a name bound two ways
anywhere in the module is resolved to every way it is bound, so a rebinding can't hide a call.
"""
from __future__ import annotations

import bisect
import builtins
import keyword
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Iterator

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Query, QueryCursor, Tree

LANGUAGE = Language(tree_sitter_python.language())
_PARSER = Parser(LANGUAGE)
_BUILTINS = frozenset(dir(builtins))


# One query collects, at C speed, every node kind the guard looks at; Python walks of the whole
# tree were the cost of a check (see bench/guard_speed.py).
_INDEX = Query(LANGUAGE, """
(function_definition) @function
(class_definition) @class
(assignment) @assignment
(import_statement) @import
(import_from_statement) @import
(future_import_statement) @import
(call) @call
(string) @string
(concatenated_string) @string
(return_statement) @return
(binary_operator operator: "@") @matmul
(augmented_assignment operator: "@=") @matmul
((identifier) @dunder (#any-of? @dunder "__builtins__" "__import__"))
(augmented_assignment) @augment
(named_expression) @walrus
(for_statement) @for
(for_in_clause) @for
(as_pattern) @as
(delete_statement) @delete
(global_statement) @global
(nonlocal_statement) @global
""")


def parse(source: str | bytes) -> Tree:
    data = source.encode("utf-8") if isinstance(source, str) else source
    return _PARSER.parse(data)


def text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def walk(node: Node) -> Iterator[Node]:
    """Every node under `node` (itself included), depth first, in source order."""
    cursor = node.walk()
    visited_children = False
    while True:
        if not visited_children:
            yield cursor.node  # type: ignore[misc]
            if cursor.goto_first_child():
                continue
        if cursor.goto_next_sibling():
            visited_children = False
        elif cursor.goto_parent():
            visited_children = True
            if cursor.node == node:
                return
        else:
            return


def walk_body(node: Node) -> Iterator[Node]:
    """Nodes under `node`, not descending into nested function or class definitions."""
    stack = list(reversed(node.children))
    while stack:
        n = stack.pop()
        yield n
        if n.type in ("function_definition", "class_definition", "decorated_definition"):
            continue
        stack.extend(reversed(n.children))


def is_chain(node: Node) -> bool:
    """True for a dotted name: an identifier or an attribute of a dotted name (or of a call)."""
    return node.type in ("identifier", "attribute")


def root_identifier(node: Node) -> Node | None:
    while node.type in ("attribute", "call", "subscript"):
        nxt = node.child_by_field_name("object") or node.child_by_field_name("function") \
            or node.child_by_field_name("value")
        if nxt is None:
            return None
        node = nxt
    return node if node.type == "identifier" else None


def string_value(node: Node) -> str | None:
    """The value of a plain string literal (no f-string interpolation), else None."""
    if node.type == "concatenated_string":
        parts = [string_value(c) for c in node.named_children]
        return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
    if node.type != "string":
        return None
    out = []
    for c in node.named_children:
        if c.type == "string_content":
            out.append(text(c))
        elif c.type == "interpolation":
            return None
        elif c.type == "escape_sequence":
            out.append(text(c))
    return "".join(out)


@dataclass
class Function:
    name: str
    node: Node                      # the function_definition
    decorators: list[Node]          # decorator expressions, outermost first
    cls: str | None = None          # enclosing class name for methods
    nested: bool = False            # defined inside another function
    value: bool = False             # a module-level `name = <expr>`: node is the assignment
    stmt: bool = False              # a module-level statement that stores into a name: node is the statement

    @property
    def body(self) -> Node:
        if self.stmt:
            return self.node
        field_name = "right" if self.value else "body"
        return self.node.child_by_field_name(field_name)  # type: ignore[return-value]

    @property
    def scanned(self) -> list[Node]:
        """What the entry-path checks read: the whole def (defaults and annotations included) and
        its decorators, which run too and can replace the function."""
        return [self.node, *self.decorators]


@dataclass
class ModuleModel:
    source: bytes
    tree: Tree
    aliases: dict[str, set[str]] = field(default_factory=dict)   # name -> qualified names
    import_nodes: list[Node] = field(default_factory=list)
    star_imports: list[Node] = field(default_factory=list)
    functions: dict[str, list[Function]] = field(default_factory=dict)   # module-level defs
    methods: dict[str, list[Function]] = field(default_factory=dict)     # methods by name
    nested: dict[str, list[Function]] = field(default_factory=dict)      # nested defs by name
    classes: dict[str, Node] = field(default_factory=dict)
    values: dict[str, list[Function]] = field(default_factory=dict)     # module-level name = expr
    module_bindings: dict[str, list[Node]] = field(default_factory=dict)  # top-level binders
    module_constants: dict[str, Node] = field(default_factory=dict)      # NAME = <literal>, bound once
    index: dict[str, list[Node]] = field(default_factory=dict)    # kind -> nodes, source order
    _starts: dict[str, list[int]] = field(default_factory=dict)
    _by_id: dict[int, Function] = field(default_factory=dict)
    _qual_cache: dict[int, frozenset[str]] = field(default_factory=dict)
    # name -> what stores into the object it names, wherever that is (`_T = {}` then `_T["f"] = g`,
    # `_T.update(f=g)`, a function that does so, a name bound inside a module-level `if`/`try`/`for`):
    # the entry path reads them with the name, so an object kept in a container is followed.
    module_writes: dict[str, list[Function]] = field(default_factory=dict)
    _callee_re: "re.Pattern[bytes] | None" = None
    chain_re: "re.Pattern[bytes] | None" = None   # set by dsl._chain_re
    _write_sites: "list[WriteSite] | None" = None

    @property
    def root(self) -> Node:
        return self.tree.root_node

    def text(self, node: Node | None) -> str:
        """Source text of `node` (much faster than Node.text, which copies the whole source)."""
        if node is None:
            return ""
        return self.source[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def nodes(self, kind: str) -> list[Node]:
        return self.index.get(kind, [])

    def nodes_in(self, kind: str, node: Node) -> list[Node]:
        """Indexed nodes of `kind` lying within `node` (itself included)."""
        starts = self._starts.get(kind)
        if starts is None:
            return []
        lo = bisect.bisect_left(starts, node.start_byte)
        hi = bisect.bisect_right(starts, node.end_byte)
        return [n for n in self.index[kind][lo:hi] if n.end_byte <= node.end_byte]

    def body_bytes(self, node: Node) -> bytes:
        return self.source[node.start_byte:node.end_byte]

    def node_at(self, start: int, end: int) -> Node | None:
        return self.root.descendant_for_byte_range(start, end)

    # -- resolution ---------------------------------------------------------------------
    def qualnames(self, node: Node) -> frozenset[str]:
        """Every fully qualified name `node` may stand for (empty if unknown).

        `t.nn.functional.softmax` with `import torch as t` -> {"torch.nn.functional.softmax"};
        a call inside a chain is kept as "()": `torch.cuda.current_stream().synchronize`.
        `getattr(x, "lit")` resolves like `x.lit`. Builtins not rebound resolve to "builtins.<name>".
        """
        key = node.id
        hit = self._qual_cache.get(key)
        if hit is not None:
            return hit
        out: frozenset[str] = frozenset()
        if node.type == "identifier":
            parent = node.parent
            if parent is not None and (
                    (parent.type == "attribute" and parent.child_by_field_name("attribute") == node)
                    or (parent.type in ("function_definition", "class_definition", "keyword_argument")
                        and parent.child_by_field_name("name") == node)):
                self._qual_cache[key] = out  # `x.open`, `def open`, `f(open=1)`: a name being defined
                return out
            name = self.text(node)
            if name in self.aliases:
                out = frozenset(self.aliases[name])
            elif name in _BUILTINS and name not in self.module_bindings and name not in self.functions:
                out = frozenset({f"builtins.{name}"})
        elif node.type == "attribute":
            obj = node.child_by_field_name("object")
            attr = self.text(node.child_by_field_name("attribute"))
            if obj is not None:
                out = frozenset(f"{q}.{attr}" for q in self.qualnames(obj))
        elif node.type == "call":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if fn is not None:
                fq = self.qualnames(fn)
                if "builtins.getattr" in fq and args is not None:
                    pos = [a for a in args.named_children if a.type != "comment"]
                    if len(pos) >= 2 and string_value(pos[1]) is not None:
                        out = frozenset(f"{q}.{string_value(pos[1])}" for q in self.qualnames(pos[0]))
                else:
                    out = frozenset(f"{q}()" for q in fq)
        elif node.type == "parenthesized_expression" and node.named_children:
            out = self.qualnames(node.named_children[0])
        self._qual_cache[key] = out
        return out

    def qualname(self, node: Node) -> str | None:
        qs = self.qualnames(node)
        return min(qs) if qs else None

    def function_of(self, node: Node) -> Function | None:
        return self._by_id.get(node.id)

    def enclosing_function(self, node: Node) -> Function | None:
        n = node.parent
        while n is not None:
            if n.type == "function_definition":
                return self._by_id.get(n.id)
            n = n.parent
        return None

    def decorator_qualnames(self, fn: Function) -> set[str]:
        out: set[str] = set()
        for d in fn.decorators:
            target = d.child_by_field_name("function") if d.type == "call" else d
            if target is not None:
                out |= self.qualnames(target)
        return out

    def all_functions(self) -> Iterator[Function]:
        yield from self._by_id.values()

    def write_sites(self) -> list["WriteSite"]:
        """Every place an object is written through a name, in source order (cached)."""
        if self._write_sites is None:
            self._write_sites = _find_write_sites(self)
        return self._write_sites

    # -- call graph ---------------------------------------------------------------------
    def callees(self, fn: Function) -> list[Function]:
        """Functions `fn` may call or hand on: any module function, nested function or class named in
        its body, and any method whose name follows a dot. Found by a regex over the body's text:
        a name in a string or comment counts too, which only over-approximates (sound)."""
        if self._callee_re is None:
            plain = set(self.functions) | set(self.nested) | set(self.classes) | set(self.values) \
                | set(self.module_writes)
            methods = set(self.methods)
            parts = []
            if plain:
                parts.append(rb"(?<![\w.])(?P<name>" + b"|".join(re.escape(n.encode()) for n in sorted(plain)) + rb")\b")
            if methods:
                parts.append(rb"\.\s*(?P<attr>" + b"|".join(re.escape(n.encode()) for n in sorted(methods)) + rb")\b")
            self._callee_re = re.compile(b"|".join(parts) if parts else rb"(?!x)x")
        out: list[Function] = []
        names: set[str] = set()
        attrs: set[str] = set()
        for part in fn.scanned:
            for m in self._callee_re.finditer(self.body_bytes(part if not fn.value else fn.body)):
                gd = m.groupdict()
                if gd.get("name"):
                    names.add(gd["name"].decode())
                elif gd.get("attr"):
                    attrs.add(gd["attr"].decode())
        for name in names:
            out += self.functions.get(name, [])
            out += self.nested.get(name, [])
            out += self.values.get(name, [])
            out += self.module_writes.get(name, [])
            if name in self.classes:  # every method and class attribute: `A.f(x)`, `A().g`, `class A: f = torch.exp`
                out += [f for fs in self.methods.values() for f in fs if f.cls == name]
        for name in attrs:
            out += self.methods.get(name, [])
        return out

    def reachable(self, roots: list[Function], stop=lambda f: False) -> list[Function]:
        """The closure of `roots` under callees(); functions where stop(f) are kept but not entered."""
        seen: dict[int, Function] = {}
        todo = list(roots)
        while todo:
            f = todo.pop()
            if f.node.id in seen:
                continue
            seen[f.node.id] = f
            if not stop(f):
                todo.extend(self.callees(f))
        return list(seen.values())


# -- where objects are written ---------------------------------------------------------------------
@dataclass
class WriteSite:
    """One write through a name: `root` is the identifier written through (None where the target
    starts at something else, `(a or b)[0] = v`), `node` the statement or call to report, `kind`:
      bind     the name itself is (re)bound: `x = ...`, `x += 1`, `for x in`, `with ... as x`, `del x`, walrus
      store    into the object it names: `x[k] = v`, `x.a = v`, `x[k] += 1`, `del x[k]`
      call     a method called on it (`x.append(v)`, `x.update(...)`, `x.a.clear()`), or `next(x)`
      setattr  `setattr(x, ...)` / `delattr(x, ...)`
    `method` is the method's name for kind "call"."""
    root: Node | None
    node: Node
    kind: str
    method: str = ""


def _targets(n: Node | None) -> Iterator[Node]:
    """The assignable expressions in a target: identifiers, subscripts and attributes."""
    if n is None:
        return
    if n.type in ("identifier", "subscript", "attribute"):
        yield n
    elif n.type in ("pattern_list", "tuple_pattern", "list_pattern", "expression_list", "tuple", "list",
                    "parenthesized_expression", "list_splat_pattern", "list_splat"):
        for c in n.named_children:
            yield from _targets(c)


def _target_sites(target: Node | None, report: Node, rebind: str = "bind") -> Iterator[WriteSite]:
    for t in _targets(target):
        if t.type == "identifier":
            yield WriteSite(t, report, rebind)
        else:
            yield WriteSite(root_identifier(t), report, "store")


def _find_write_sites(m: "ModuleModel") -> list[WriteSite]:
    out: list[WriteSite] = []
    for a in m.nodes("assignment"):
        out += _target_sites(a.child_by_field_name("left"), a)
    for a in m.nodes("augment"):
        out += _target_sites(a.child_by_field_name("left"), a)
    for d in m.nodes("delete"):
        for c in d.named_children:
            out += _target_sites(c, d)
    for w in m.nodes("walrus"):
        out += _target_sites(w.child_by_field_name("name"), w)
    for f in m.nodes("for"):
        out += _target_sites(f.child_by_field_name("left"), f)
    for a in m.nodes("as"):
        alias = a.child_by_field_name("alias")
        for c in ([alias] if alias is not None else []):
            out += _target_sites(c.named_children[0] if c.type == "as_pattern_target" and c.named_children else c, a)
    for call in m.nodes("call"):
        fn = call.child_by_field_name("function")
        if fn is None:
            continue
        if fn.type == "attribute":
            obj = fn.child_by_field_name("object")
            root = root_identifier(obj) if obj is not None else None
            if root is not None or (obj is not None and obj.type not in ("string", "concatenated_string")):
                out.append(WriteSite(root, call, "call", m.text(fn.child_by_field_name("attribute"))))
            continue
        qs = m.qualnames(fn)
        args = call.child_by_field_name("arguments")
        pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
        if pos and qs & {"builtins.setattr", "builtins.delattr"}:
            out.append(WriteSite(root_identifier(pos[0]) if pos[0].type != "identifier" else pos[0], call, "setattr"))
        elif pos and "builtins.next" in qs:
            out.append(WriteSite(root_identifier(pos[0]) if pos[0].type != "identifier" else pos[0], call, "call",
                                 "__next__"))
    out.sort(key=lambda w: w.node.start_byte)
    return out


_LOCAL_SCOPES = ("function_definition", "class_definition", "lambda", "list_comprehension", "set_comprehension",
                 "dictionary_comprehension", "generator_expression")


def _module_scope(n: Node) -> bool:
    p = n.parent
    while p is not None:
        if p.type in _LOCAL_SCOPES:
            return False
        p = p.parent
    return True


def _global_names(m: "ModuleModel", fn_node: Node) -> set[str]:
    return {m.text(c) for g in m.nodes_in("global", fn_node) for c in g.named_children if c.type == "identifier"}


def _index_module_writes(m: "ModuleModel") -> None:
    """model.module_writes: for each module-level name, the module-level statements (other than defs
    and imports) that bind or store into it, and the functions that store into it (or rebind it
    under `global`). Over-approximate on purpose: it only adds code to the entry path."""
    imported = {m.text(b) for st in m.import_nodes for b in _binders(st)}
    # Names of the module's scope: bound by a top-level statement, or anywhere in module-level code
    # but a lambda's or a comprehension's own scope (`if X: _F = ...`, `for _k in ...`).
    scope = set(m.module_bindings) | {m.text(w.root) for w in m.write_sites() if w.kind == "bind"
                                      and w.root is not None and _module_scope(w.root)}
    top: dict[int, Function] = {}
    globals_of: dict[int, set[str]] = {}
    for site in m.write_sites():
        if site.root is None:
            continue
        name = m.text(site.root)
        if name in imported or name not in scope:
            continue
        fn = m.enclosing_function(site.node)
        if fn is None:  # module-level code: key the top-level statement holding it
            stmt = site.node
            while stmt.parent is not None and stmt.parent.type != "module":
                stmt = stmt.parent
            if stmt.type in ("function_definition", "class_definition", "decorated_definition"):
                continue  # (a class body's own names: the class's attributes, read as methods already)
            unit = top.get(stmt.id)
            if unit is None:
                unit = top[stmt.id] = Function(name, stmt, [], stmt=True)
        else:
            if site.kind == "bind":
                g = globals_of.get(fn.node.id)
                if g is None:
                    g = globals_of[fn.node.id] = _global_names(m, fn.node)
                if name not in g:
                    continue  # a local of the function
            unit = fn
        units = m.module_writes.setdefault(name, [])
        if all(u.node.id != unit.node.id for u in units):
            units.append(unit)


def _decorators(defn: Node) -> list[Node]:
    parent = defn.parent
    if parent is None or parent.type != "decorated_definition":
        return []
    return [d.named_children[0] for d in parent.children if d.type == "decorator" and d.named_children]


def _add_alias(model: ModuleModel, name: str, qual: str) -> None:
    model.aliases.setdefault(name, set()).add(qual)


def _collect_imports(model: ModuleModel, node: Node) -> None:
    model.import_nodes.append(node)
    if node.type == "import_statement":
        for c in node.named_children:
            if c.type == "dotted_name":
                full = text(c)
                _add_alias(model, full.split(".")[0], full.split(".")[0])
            elif c.type == "aliased_import":
                _add_alias(model, text(c.child_by_field_name("alias")), text(c.child_by_field_name("name")))
    elif node.type == "import_from_statement":
        mod_node = node.child_by_field_name("module_name")
        mod = text(mod_node)
        for c in node.named_children:
            if c == mod_node:
                continue
            if c.type == "wildcard_import":
                model.star_imports.append(node)
            elif c.type == "dotted_name":
                _add_alias(model, text(c).split(".")[-1], f"{mod}.{text(c)}")
            elif c.type == "aliased_import":
                _add_alias(model, text(c.child_by_field_name("alias")),
                           f"{mod}.{text(c.child_by_field_name('name'))}")
    elif node.type == "future_import_statement":
        pass


_LITERALS = ("true", "false", "none", "integer", "float", "string")


def build_model(source: str | bytes) -> ModuleModel:
    data = source.encode("utf-8") if isinstance(source, str) else source
    tree = parse(data)
    model = ModuleModel(source=data, tree=tree)
    caps = QueryCursor(_INDEX).captures(tree.root_node)
    for kind, nodes in caps.items():
        nodes.sort(key=lambda n: n.start_byte)
        model.index[kind] = nodes
        model._starts[kind] = [n.start_byte for n in nodes]
    assigns: list[tuple[Node, Node]] = []   # (target identifier, value) for alias resolution
    const_counts: dict[str, int] = {}
    for n in model.nodes("import"):
        _collect_imports(model, n)
    for n in model.nodes("function"):
        name = model.text(n.child_by_field_name("name"))
        scope = n.parent.parent if n.parent is not None and n.parent.type == "decorated_definition" else n.parent
        # scope is the block (or module) holding the def
        owner = scope.parent if scope is not None and scope.type == "block" else None
        fn = Function(name, n, _decorators(n))
        if owner is None:
            model.functions.setdefault(name, []).append(fn)
        elif owner.type == "class_definition":
            fn.cls = model.text(owner.child_by_field_name("name"))
            model.methods.setdefault(name, []).append(fn)
        else:
            fn.nested = True
            model.nested.setdefault(name, []).append(fn)
        model._by_id[n.id] = fn
    for n in model.nodes("class"):
        cname = text(n.child_by_field_name("name"))
        model.classes[cname] = n
        body = n.child_by_field_name("body")
        # Class attributes (`f = torch.exp`, `impl = staticmethod(_launch)`) are read like methods: a
        # reference to the class, or `.f` anywhere on the path, puts them on the entry path.
        for stmt in (body.named_children if body is not None else []):
            if stmt.type == "expression_statement" and stmt.named_children and stmt.named_children[0].type == "assignment":
                a = stmt.named_children[0]
                left = a.child_by_field_name("left")
                if left is not None and left.type == "identifier" and a.child_by_field_name("right") is not None:
                    model.methods.setdefault(model.text(left), []).append(
                        Function(model.text(left), a, [], cls=cname, value=True))
    for n in model.nodes("assignment"):
        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
        if left is not None and left.type == "identifier" and right is not None:
            assigns.append((left, right))
    # Module-level binders (for "is the entry rebound?" and for builtins shadowing).
    for stmt in tree.root_node.named_children:
        s = stmt.named_children[0] if stmt.type == "decorated_definition" and stmt.named_children else stmt
        for binder in _binders(s):
            model.module_bindings.setdefault(model.text(binder), []).append(stmt)
        if s.type == "expression_statement" and s.named_children and s.named_children[0].type == "assignment":
            a = s.named_children[0]
            left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
            if left is not None and left.type == "identifier":
                name = model.text(left)
                const_counts[name] = const_counts.get(name, 0) + 1
                if right is not None and right.type in _LITERALS:
                    model.module_constants[name] = right
                if right is not None:
                    # Module-level values the entry names (a lambda, functools.partial(torch.exp),
                    # an instance) are read as part of the entry path.
                    model.values.setdefault(name, []).append(Function(name, a, [], value=True))
    for name, k in const_counts.items():
        if k > 1:
            model.module_constants.pop(name, None)
    # `f = torch.exp` / `k = _kernel`: a name bound to a dotted name stands for it too.
    # Iterate, since `a = torch; b = a.exp` needs two rounds.
    for _ in range(4):
        found: list[tuple[str, frozenset[str]]] = []
        for left, right in assigns:
            if right.type not in ("identifier", "attribute", "call", "parenthesized_expression"):
                continue
            if right.type == "call":
                fnode = right.child_by_field_name("function")
                if fnode is None or "builtins.getattr" not in model.qualnames(fnode):
                    continue
            found.append((model.text(left), model.qualnames(right)))
        changed = False
        for name, qs in found:
            for q in qs:
                # `idx = torch.topk(...).indices` is a value, not another name for a function.
                if "()" in q:
                    continue
                if q != f"builtins.{name}" and q not in model.aliases.get(name, ()):
                    _add_alias(model, name, q)
                    changed = True
        model._qual_cache.clear()
        if not changed:
            break
    model._qual_cache.clear()
    _index_module_writes(model)
    # A torch.library.triton_op is called as torch.ops.<ns>.<op>: `.op` reaches the decorated function.
    for fn in list(model._by_id.values()):
        for d in fn.decorators:
            if d.type != "call" or "torch.library.triton_op" not in model.qualnames(d.child_by_field_name("function")):
                continue
            args = d.child_by_field_name("arguments")
            pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
            v = string_value(pos[0]) if pos else None
            if v and "::" in v:
                model.methods.setdefault(v.split("::", 1)[1], []).append(fn)
    return model


def _binders(stmt: Node) -> list[Node]:
    """Identifiers a top-level statement binds."""
    t = stmt.type
    if t in ("function_definition", "class_definition"):
        n = stmt.child_by_field_name("name")
        return [n] if n is not None else []
    if t == "expression_statement" and stmt.named_children:
        a = stmt.named_children[0]
        if a.type in ("assignment", "augmented_assignment"):
            left = a.child_by_field_name("left")
            if left is None:
                return []
            if left.type == "identifier":
                return [left]
            if left.type in ("pattern_list", "tuple_pattern"):
                return [c for c in left.named_children if c.type == "identifier"]
        return []
    if t == "import_statement":
        out = []
        for c in stmt.named_children:
            if c.type == "dotted_name" and c.named_children:
                out.append(c.named_children[0])
            elif c.type == "aliased_import":
                out.append(c.child_by_field_name("alias"))
        return [o for o in out if o is not None]
    if t == "import_from_statement":
        mod = stmt.child_by_field_name("module_name")
        out = []
        for c in stmt.named_children:
            if c == mod:
                continue
            if c.type == "dotted_name" and c.named_children:
                out.append(c.named_children[-1])
            elif c.type == "aliased_import":
                out.append(c.child_by_field_name("alias"))
        return [o for o in out if o is not None]
    return []


@lru_cache(maxsize=64)
def cached_model(source: bytes) -> ModuleModel:
    return build_model(source)


# -- getattr(obj, "name") read as obj.name ---------------------------------------------------------
_LOOKUP_READS = frozenset({"builtins.getattr", "builtins.hasattr"})
_SIMPLE_OBJECTS = ("identifier", "attribute", "call", "subscript", "parenthesized_expression")


@dataclass
class SourceMap:
    """Byte offsets of a rewritten source back to the original: (new_start, orig_start, copied)
    segments in order; an offset in a written (not copied) segment maps to the call it replaced."""
    segments: list[tuple[int, int, bool]]

    def original(self, offset: int) -> int:
        i = bisect.bisect_right([s[0] for s in self.segments], offset) - 1
        new_start, orig_start, copied = self.segments[max(i, 0)]
        return orig_start + (offset - new_start) if copied else orig_start


def desugar_lookups(m: ModuleModel) -> tuple[bytes, SourceMap] | None:
    """The source with every `getattr(obj, "name"[, default])` and `hasattr(obj, "name")` whose name is
    a literal identifier written `obj.name`, so that every rule (the allowlist, private names, the
    rules packs' queries, torch on the entry path) judges it exactly as the attribute spelling:
    `getattr(torch, "from_file")` trips what `torch.from_file` trips. None when there is none."""
    found: list[tuple[Node, Node, str, Node | None]] = []
    for call in m.nodes("call"):
        fn = call.child_by_field_name("function")
        args = call.child_by_field_name("arguments")
        if fn is None or args is None or args.type != "argument_list" or not (m.qualnames(fn) & _LOOKUP_READS):
            continue
        pos = [a for a in args.named_children if a.type != "comment"]
        if not 2 <= len(pos) <= 3 or any(a.type in ("keyword_argument", "list_splat", "dictionary_splat") for a in pos):
            continue
        name = string_value(pos[1])
        if name is None or not name.isidentifier() or keyword.iskeyword(name):
            continue  # a computed name is dsl.py's dynamic-lookup's business
        found.append((call, pos[0], name, pos[2] if len(pos) == 3 else None))
    if not found:
        return None
    found.sort(key=lambda f: f[0].start_byte)
    src = m.source
    out = bytearray()
    segments: list[tuple[int, int, bool]] = []

    def copy(a: int, b: int) -> None:
        if a < b:
            segments.append((len(out), a, True))
            out.extend(src[a:b])

    def write(data: bytes, at: int) -> None:
        segments.append((len(out), at, False))
        out.extend(data)

    def emit(a: int, b: int) -> None:
        cursor = a
        for call, obj, name, default in found:
            if call.start_byte < cursor or call.end_byte > b:
                continue  # nested in one already written, or outside this range
            copy(cursor, call.start_byte)
            # getattr(o, "n", d) -> (o.n or d): the default is code too, and stays where it is read
            wrap = obj.type not in _SIMPLE_OBJECTS
            if default is not None:
                write(b"(", call.start_byte)
            if wrap:
                write(b"(", call.start_byte)
            emit(obj.start_byte, obj.end_byte)
            write((b")." if wrap else b".") + name.encode(), call.start_byte)
            if default is not None:
                write(b" or ", call.start_byte)
                emit(default.start_byte, default.end_byte)
                write(b")", call.start_byte)
            cursor = call.end_byte
        copy(cursor, b)

    emit(0, len(src))
    return bytes(out), SourceMap(segments)

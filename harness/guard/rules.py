"""Rules packs: forbidden moves as data, each detected by a tree-sitter query, a named static
check (harness/guard/dsl.py) or a named runtime check (the evaluator's).

A pack is `packs/rules/<id>/pack.toml` with `[[rule]]` tables:

    [[rule]]
    id = "no-side-streams"
    message = "Run everything on the current stream: do not create or switch CUDA streams."
    query = '((call function: (_) @f) @violation (#qualname-match? @f "^torch\\.cuda\\.(Stream|stream)$"))'
    # or: check = "triton-launch"        (a static check of dsl.py)
    # or: runtime = "no-side-streams"    (performed by the evaluator)
    severity = "error"                   # or "warning": reported, does not reject

A rule is compiled when its pack is loaded; anything wrong with it (query syntax, an unknown
predicate, a bad regex, an unknown check id, a misspelt key) is a RuleError naming the file, the rule
and the parser's message. A broken rule is never skipped silently.

Queries can use tree-sitter's own predicates (#eq?, #match?, #any-of? ...) and these, which see
through import aliases and the module's call graph:
    (#qualname-match? @x "regex")   @x (a name, attribute chain or call) resolves, through imports
    (#not-qualname-match? @x "re")  and aliases, to a dotted name matching the regex (re.search)
    (#qualname-eq? @x "torch.exp")  exact form of the above
    (#entry-path? @x)               @x lies in the entry function or a function it can reach
    (#not-entry-path? @x)
    (#inside? @x "type ...")        @x has an ancestor of one of these node types
    (#not-inside? @x "type ...")
    (#imported? @x)                 the root name of @x is bound by an import
    (#module-global? @x)            @x is a name assigned at module level (not an import or def)
    (#handle? @x) (#not-handle? @x) @x is a compiled DSL object (a cute.compile / load_inline result,
                                    a name or container bound to one, a @triton.jit kernel)
    (#returned? @x)                 @x is a name the enclosing function also returns
The reported position is the capture named @violation, else the query's first capture.
"""
from __future__ import annotations

import dataclasses
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tree_sitter import Node, Query, QueryCursor, QueryError

from harness.authoring.paths import builtin_dir, user_packs_dir

from . import allow as _allow
from . import dsl as _dsl
from .pyparse import LANGUAGE, ModuleModel, root_identifier, text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_RULES_DIR = builtin_dir("packs") / "rules"


@dataclass(frozen=True)
class Rule:
    id: str
    message: str
    query: str | None
    runtime: str | None
    pack: str
    severity: str = "error"
    check: str | None = None   # a static check id of harness/guard/dsl.py (STATIC_CHECKS) or allow.py
    allow: tuple[str, ...] = ()  # the pack's [allow] additions ("module:X", "name:X.y"), on each of its rules

    @property
    def kind(self) -> str:
        return "query" if self.query else "check" if self.check else "runtime"


class RuleError(Exception):
    """A rules pack that can't be used. str(): "<pack.toml path>: rule <id>: <problem>"."""

    def __init__(self, path: Path | str, rule_id: str | None, problem: str):
        self.path, self.rule_id, self.problem = str(path), rule_id, problem
        where = f"{self.path}: rule {rule_id}: " if rule_id else f"{self.path}: "
        super().__init__(where + problem)


RUNTIME_CHECKS: dict[str, str] = {
    "cuda-graph-capturable": "the entry is captured in a CUDA graph and replayed; replay output must match eager output",
    "long-context": "every shape tagged 'long' is run and checked; none may be skipped",
    "dsl-kernel-runs": "a kernel of the task's DSL really runs (profiler names; a no-op swap must change the output)",
    "inputs-unmodified": "inputs are compared to a saved copy after each call",
    "output-fresh": "the output is a plain torch.Tensor with its own storage, not aliasing inputs or earlier outputs",
    "no-side-streams": "no CUDA stream other than the current one is used during the call",
    "no-threads": "the thread count is the same before and after the call; no child processes",
    "poison-consistent": "outputs are identical when run twice with differently poisoned memory",
    "timed-outputs-correct": "outputs of timed calls are rechecked, so work can't be deferred past the timer",
    "task-files-unchanged": "the task folder (reference.py, task.toml) hashes the same after the run",
    "no-introspection": "candidate code triggers no gc/frame/code-object/ctypes audit event (reaching into the harness)",
    "torch-compute": "no torch compute op (operators and builtins included) runs during the call, and few values go to Python",
}

BUILTIN_PREDICATES = frozenset({
    "eq?", "not-eq?", "any-eq?", "any-not-eq?", "match?", "not-match?", "any-match?",
    "any-not-match?", "any-of?", "not-any-of?",
})
# name -> (number of captures, number of strings; None = one or more)
CUSTOM_PREDICATES: dict[str, tuple[int, int | None]] = {
    "qualname-match?": (1, 1), "not-qualname-match?": (1, 1), "qualname-eq?": (1, 1),
    "entry-path?": (1, 0), "not-entry-path?": (1, 0),
    "inside?": (1, None), "not-inside?": (1, None),
    "imported?": (1, 0), "module-global?": (1, 0),
    "handle?": (1, 0), "not-handle?": (1, 0), "returned?": (1, 0),
}
_RULE_KEYS = {"id", "message", "query", "runtime", "check", "severity", "note", "sources"}
_ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")

_QUERY_CACHE: dict[str, Query] = {}


def compiled_query(src: str) -> Query:
    q = _QUERY_CACHE.get(src)
    if q is None:
        q = _QUERY_CACHE[src] = Query(LANGUAGE, src)
    return q


def _predicate_forms(src: str) -> list[tuple[str, list[tuple[str, str]], int]]:
    """(name, [(kind, value)], offset) for each `(#name ...)` form; kind is capture|string|word."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            i = _skip_string(src, i)
            continue
        if c == ";":
            j = src.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if c == "(":
            j = i + 1
            while j < n and src[j].isspace():
                j += 1
            if j < n and src[j] == "#":
                k = j + 1
                while k < n and not src[k].isspace() and src[k] not in "()":
                    k += 1
                name, args, p = src[j + 1:k], [], k
                while p < n and src[p] != ")":
                    if src[p].isspace():
                        p += 1
                    elif src[p] == '"':
                        e = _skip_string(src, p)
                        args.append(("string", _unescape(src[p + 1:e - 1])))
                        p = e
                    else:
                        e = p
                        while e < n and not src[e].isspace() and src[e] not in "()":
                            e += 1
                        tok = src[p:e]
                        args.append(("capture", tok[1:]) if tok.startswith("@") else ("word", tok))
                        p = max(e, p + 1)
                out.append((name, args, i))
                i = p + 1
                continue
        i += 1
    return out


def _skip_string(src: str, i: int) -> int:
    j = i + 1
    while j < len(src):
        if src[j] == "\\":
            j += 2
            continue
        if src[j] == '"':
            return j + 1
        j += 1
    return j


def _unescape(s: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), s)


def _validate_query(src: str, rule_id: str, path: Path) -> None:
    try:
        q = compiled_query(src)
    except QueryError as e:
        raise RuleError(path, rule_id, f"bad tree-sitter query: {e}") from None
    if q.capture_count == 0:
        raise RuleError(path, rule_id, "query has no capture: add @violation to the node to report")
    for name, args, _ in _predicate_forms(src):
        if name in BUILTIN_PREDICATES:
            continue
        if name not in CUSTOM_PREDICATES:
            known = ", ".join(sorted(BUILTIN_PREDICATES | set(CUSTOM_PREDICATES)))
            raise RuleError(path, rule_id, f"unknown predicate #{name} (known: {known})")
        ncap, nstr = CUSTOM_PREDICATES[name]
        caps = [v for k, v in args if k == "capture"]
        strs = [v for k, v in args if k == "string"]
        words = [v for k, v in args if k == "word"]
        if words or len(caps) != ncap or (nstr is None and not strs) or (nstr is not None and len(strs) != nstr):
            want = f"{ncap} capture(s) and " + ("one or more strings" if nstr is None else f"{nstr} string(s)")
            raise RuleError(path, rule_id, f"#{name} takes {want}, got {args}")
        if "match" in name:
            try:
                re.compile(strs[0])
            except re.error as e:
                raise RuleError(path, rule_id, f"#{name}: bad regular expression {strs[0]!r}: {e}") from None


def compile_rules(raw: list[dict], pack_id: str, toml_path: Path) -> list[Rule]:
    """Validate `[[rule]]` tables now (queries compiled, ids known) and return the rules."""
    if not isinstance(raw, list):
        raise RuleError(toml_path, None, "`rule` must be an array of tables ([[rule]])")
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, r in enumerate(raw):
        if not isinstance(r, dict):
            raise RuleError(toml_path, f"#{i + 1}", "each [[rule]] must be a table")
        rid = r.get("id")
        if not isinstance(rid, str) or not _ID_RE.match(rid):
            raise RuleError(toml_path, f"#{i + 1}", f"id {rid!r} missing or not lowercase letters, digits, '-', '.', '_'")
        if rid in seen:
            raise RuleError(toml_path, rid, "duplicate rule id in this pack")
        seen.add(rid)
        unknown = set(r) - _RULE_KEYS
        if unknown:
            raise RuleError(toml_path, rid, f"unknown key(s) {sorted(unknown)}; known: {sorted(_RULE_KEYS)}")
        msg = r.get("message")
        if not isinstance(msg, str) or not msg.strip():
            raise RuleError(toml_path, rid, "message missing: it is what the agent is told, write it as an instruction")
        kinds = [k for k in ("query", "runtime", "check") if r.get(k) is not None]
        if len(kinds) != 1:
            raise RuleError(toml_path, rid, f"needs exactly one of query, runtime, check (got {kinds or 'none'})")
        severity = r.get("severity", "error")
        if severity not in ("error", "warning"):
            raise RuleError(toml_path, rid, f"severity {severity!r} must be 'error' or 'warning'")
        query = runtime = check = None
        if kinds[0] == "query":
            query = r["query"]
            if not isinstance(query, str) or not query.strip():
                raise RuleError(toml_path, rid, "query must be a non-empty string")
            _validate_query(query, rid, toml_path)
        elif kinds[0] == "runtime":
            runtime = r["runtime"]
            if runtime not in RUNTIME_CHECKS:
                raise RuleError(toml_path, rid, f"unknown runtime check {runtime!r} (known: {', '.join(RUNTIME_CHECKS)})")
        else:
            check = r["check"]
            if check not in _dsl.STATIC_CHECKS and check not in _allow.ALLOW_CHECKS:
                known = ", ".join([*_dsl.STATIC_CHECKS, *_allow.ALLOW_CHECKS])
                raise RuleError(toml_path, rid, f"unknown static check {check!r} (known: {known})")
        rules.append(Rule(rid, msg.strip(), query, runtime, pack_id, severity, check))
    return rules


_PACK_CACHE: dict[tuple[str, int], list[Rule]] = {}


def _read_allow(raw: object, path: Path) -> tuple[str, ...]:
    """A pack's `[allow]` table: `modules` (importable, never used as values) and `names` (dotted
    names, or `stdlibmodule.*`), as ("module:X", "name:X.y") entries. Checked now, never skipped."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise RuleError(path, None, "[allow] must be a table with `modules` and/or `names` (lists of dotted names)")
    unknown = set(raw) - {"modules", "names"}
    if unknown:
        raise RuleError(path, None, f"[allow]: unknown key(s) {sorted(unknown)}; known: ['modules', 'names']")
    out: list[str] = []
    for kind in ("modules", "names"):
        vals = raw.get(kind, [])
        if not isinstance(vals, list):
            raise RuleError(path, None, f"[allow] {kind} must be a list of dotted names")
        for v in vals:
            why = _allow.validate_allow_entry(kind, v)
            if why:
                raise RuleError(path, None, f"[allow] {kind}: {why}")
            out.append(f"{kind[:-1] if kind == 'modules' else 'name'}:{v}")
    return tuple(out)


def load_rules_pack(pack_dir: Path) -> list[Rule]:
    """Read `<pack_dir>/pack.toml` and compile its [[rule]] tables (cached by file mtime)."""
    path = Path(pack_dir) / "pack.toml"
    try:
        st = path.stat()
    except OSError:
        raise RuleError(path, None, "missing: a rules pack is a folder with pack.toml") from None
    key = (str(path.resolve()), st.st_mtime_ns)
    hit = _PACK_CACHE.get(key)
    if hit is not None:
        return hit
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise RuleError(path, None, f"bad TOML: {e}") from None
    kind = data.get("kind", "rules")
    if kind != "rules":
        raise RuleError(path, None, f"kind is {kind!r}, not 'rules'")
    pack_id = data.get("id", Path(pack_dir).name)
    if not isinstance(pack_id, str) or not pack_id:
        raise RuleError(path, None, "id must be a non-empty string")
    rules = compile_rules(data.get("rule", []), pack_id, path)
    allow = _read_allow(data.get("allow"), path)
    if allow:
        if not rules:
            raise RuleError(path, None, "an [allow] table extends the allowlist of the tasks that enforce this "
                            "pack: the pack needs at least one [[rule]]")
        rules = [dataclasses.replace(r, allow=allow) for r in rules]
    _PACK_CACHE[key] = rules
    return rules


def pack_search_dirs() -> list[Path]:
    """Where rules packs are looked up, first match wins: WARPSMITH_PACKS, the project's
    .warpsmith/packs, the user's config dir, then the built-in packs/rules."""
    dirs = [Path(p) for p in os.environ.get("WARPSMITH_PACKS", "").split(os.pathsep) if p]
    dirs.append(Path.cwd() / ".warpsmith" / "packs")
    dirs.append(user_packs_dir())
    dirs.append(BUILTIN_RULES_DIR)
    return dirs


def find_rules_pack(pack_id: str) -> Path:
    for d in pack_search_dirs():
        for cand in (d / pack_id, d / "rules" / pack_id, d):
            if (cand / "pack.toml").is_file() and (cand != d or d.name == pack_id):
                return cand
    raise RuleError(pack_id, None, f"no rules pack {pack_id!r} (searched {', '.join(str(d) for d in pack_search_dirs())})")


# -- running query rules ------------------------------------------------------------------------
@dataclass
class QueryContext:
    model: ModuleModel
    entry_fn_ids: Callable[[], set[int]]
    is_handle: Callable[[Node], bool] = lambda n: False


def _node_qualnames(model: ModuleModel, node: Node) -> frozenset[str]:
    if node.type == "call":
        fn = node.child_by_field_name("function")
        return model.qualnames(fn) if fn is not None else frozenset()
    if node.type == "decorator" and node.named_children:
        return _node_qualnames(model, node.named_children[0])
    return model.qualnames(node)


def _make_predicate(ctx: QueryContext):
    def predicate(name: str, args: list[tuple[str, str]], _pattern: int, captures: dict[str, list[Node]]) -> bool:
        cap = next((v for v, kind in args if kind == "capture"), None)
        strs = [v for v, kind in args if kind == "string"]
        nodes = captures.get(cap, []) if cap else []
        if not nodes:
            return False
        node = nodes[0]
        m = ctx.model
        if name in ("qualname-match?", "not-qualname-match?"):
            rx = re.compile(strs[0])
            hit = any(rx.search(q) for q in _node_qualnames(m, node))
            return hit if name == "qualname-match?" else not hit
        if name == "qualname-eq?":
            return strs[0] in _node_qualnames(m, node)
        if name in ("entry-path?", "not-entry-path?"):
            ids = ctx.entry_fn_ids()
            p, on = node, False
            while p is not None:
                if p.id in ids:  # a def on the path, or a module-level value it names
                    on = True
                    break
                p = p.parent
            return on if name == "entry-path?" else not on
        if name in ("inside?", "not-inside?"):
            types = {t for s in strs for t in s.split()}
            p, found = node.parent, False
            while p is not None:
                if p.type in types:
                    found = True
                    break
                p = p.parent
            return found if name == "inside?" else not found
        if name == "imported?":
            r = root_identifier(node) if node.type != "identifier" else node
            return r is not None and text(r) in m.aliases and any(
                not q.startswith("builtins.") for q in m.aliases[text(r)])
        if name == "returned?":
            return _returned(m, node)
        if name in ("handle?", "not-handle?"):
            h = ctx.is_handle(node)
            return h if name == "handle?" else not h
        if name == "module-global?":
            nm = text(node)
            binds = m.module_bindings.get(nm, [])
            return node.type == "identifier" and any(
                b.type == "expression_statement" for b in binds)
        return True  # unreachable: unknown predicates are refused at load

    return predicate


@dataclass
class _Combined:
    query: Query
    owners: list[tuple[Rule, list[str]]]   # by pattern index: (rule, capture names to report, in order)


_COMBINED: dict[tuple[str, ...], _Combined] = {}


def _combined(rules: list[Rule]) -> _Combined | None:
    """All query rules as one tree-sitter query, so the tree is searched once, not once per rule."""
    qrules = [r for r in rules if r.query]
    if not qrules:
        return None
    key = tuple(r.query for r in qrules)  # type: ignore[misc]
    hit = _COMBINED.get(key)
    if hit is not None:
        return hit
    owners: list[tuple[Rule, list[str]]] = []
    for r in qrules:
        sub = compiled_query(r.query)  # type: ignore[arg-type]
        names = [sub.capture_name(i) for i in range(sub.capture_count)]
        order = (["violation"] if "violation" in names else []) + names
        owners += [(r, order)] * sub.pattern_count
    q = Query(LANGUAGE, "\n".join(r.query for r in qrules))  # type: ignore[misc]
    assert q.pattern_count == len(owners), "pattern count of the combined query drifted"
    hit = _COMBINED[key] = _Combined(q, owners)
    if len(_COMBINED) > 64:
        _COMBINED.clear()
        _COMBINED[key] = hit
    return hit


def _returned(m: ModuleModel, node: Node) -> bool:
    if node.type != "identifier":
        return False
    fn = node.parent
    while fn is not None and fn.type != "function_definition":
        fn = fn.parent
    if fn is None:
        return False
    name = m.text(node)
    for r in m.nodes_in("return", fn):
        vals = r.named_children
        if vals and vals[0].type in ("expression_list", "tuple"):
            vals = vals[0].named_children
        if any(v.type == "identifier" and m.text(v) == name for v in vals):
            return True
    return False


def run_queries(rules: list[Rule], ctx: QueryContext) -> list[tuple[Rule, Node]]:
    """(rule, reported node) for every match of every query rule in `rules`, one search."""
    c = _combined(rules)
    if c is None:
        return []
    out: list[tuple[Rule, Node]] = []
    for idx, caps in QueryCursor(c.query).matches(ctx.model.root, predicate=_make_predicate(ctx)):
        rule, order = c.owners[idx]
        for nm in order:
            if caps.get(nm):
                out.append((rule, caps[nm][0]))
                break
    return out


def run_query(rule: Rule, ctx: QueryContext) -> list[Node]:
    """Nodes reported by one query rule (one per match)."""
    return [n for _, n in run_queries([rule], ctx)]


def describe(rule: Rule) -> dict[str, Any]:
    """A plain dict of a rule, for prompts and --json listings."""
    return {"id": rule.id, "pack": rule.pack, "message": rule.message, "kind": rule.kind,
            "severity": rule.severity, "runtime": rule.runtime, "check": rule.check}

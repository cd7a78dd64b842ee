"""Static guardrails: read a candidate with tree-sitter and reject what breaks the rules, before
it costs any GPU time. Rules come from rules packs (harness/guard/rules.py); the DSL requirement
is the pack `dsl-<task.dsl>`, always applied; its structural checks live in harness/guard/dsl.py.
What a check costs is measured in harness/guard/speed.py (a generated 500-line candidate, checked
again and again; bench/guard_speed.py is its command line).
"""
from __future__ import annotations

import ast
import re
import unicodedata
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from harness import sourcefile

from . import allow as _allow
from . import dsl as _dsl
from .pyparse import build_model, desugar_lookups, text, walk
from .rules import (RUNTIME_CHECKS, Rule, RuleError, QueryContext, compile_rules, find_rules_pack,
                    load_rules_pack, run_queries)

if TYPE_CHECKING:
    from harness.authoring.tasks import Task

SYNTAX_RULE = "python-syntax"
GUARD_RULE = "guard-unreadable"
ENCODING_RULE = sourcefile.ENCODING_RULE   # bytes every reader decodes the same way (harness/sourcefile.py)
TEXT_RULE = "source-text"                  # text the guard's parser and Python split the same way


@dataclass
class Violation:
    rule: str
    message: str
    line: int      # 1-based
    col: int       # 1-based
    snippet: str
    severity: str = "error"

    def to_dict(self) -> dict:
        return asdict(self)


def _dedupe(ids: Iterable[str]) -> list[str]:
    out: list[str] = []
    for i in ids:
        if i and i not in out:
            out.append(i)
    return out


def rules_for_task(task: "Task", extra: Iterable[str] = (), remove: Iterable[str] = ()) -> list[Rule]:
    """The task's rules packs (+ extra pack ids or pack folders), always with `dsl-<task.dsl>`, less
    `remove` (pack ids or rule ids). Raises RuleError for an unknown or broken pack."""
    remove = list(remove)
    pack_ids = _dedupe([*task.enforced_rules_packs, *extra])
    known_rule_ids: set[str] = set()
    rules: list[Rule] = []
    for pid in pack_ids:
        if pid in remove:
            continue
        # An extra may be a pack's folder (the one a session's catalog chose), else an id to look up.
        folder = Path(pid) if ("/" in pid or "\\" in pid) else find_rules_pack(pid)
        if not (folder / "pack.toml").is_file():  # another machine (a Ray node): the same id here
            try:
                folder = find_rules_pack(folder.name)
            except RuleError:
                raise RuleError(pid, None, f"the rules pack {folder.name!r} selected for this session is not "
                                f"on this machine ({folder} is missing, and no pack of that id is installed "
                                "here): install it on every machine that evaluates, or deselect it") from None
        for r in load_rules_pack(folder):
            known_rule_ids.add(r.id)
            if r.id not in remove:
                rules.append(r)
    unknown = [x for x in remove if x not in pack_ids and x not in known_rule_ids]
    if unknown:
        raise RuleError(task.toml_path, None, f"cannot remove {unknown}: neither a selected pack nor one of its rules")
    return rules


def _python_says(source: str) -> tuple[str, int, int] | None:
    """Python's own parser on a candidate tree-sitter could not read: (message, line, col), or None
    if Python accepts it. Its messages are the ones people (and models) know; asked only on error,
    so a clean candidate pays nothing for it (ast.parse would add about a third to the check)."""
    try:
        with warnings.catch_warnings():  # invalid escapes etc.: not this rule's business, not on stderr
            warnings.simplefilter("ignore")
            ast.parse(source)
    except SyntaxError as e:
        where = f" at line {e.lineno}" if e.lineno else ""
        what = "" if e.msg == "invalid syntax" else f": {e.msg}"
        return f"invalid syntax{where}{what}", e.lineno or 1, e.offset or 1
    except ValueError as e:  # null bytes (3.11)
        return f"invalid source: {e}", 1, 1
    return None


def _syntax_violation(model) -> Violation | None:
    root = model.root
    if not root.has_error:
        return None
    source = model.source.decode("utf-8", "replace")
    lines = source.splitlines()
    said = _python_says(source)
    if said is not None:
        msg, r, c = said
        return Violation(SYNTAX_RULE, f"The candidate is not valid Python: {msg}.", r, c,
                         lines[r - 1].strip()[:160] if 0 < r <= len(lines) else "")
    for n in walk(root):  # Python reads it, tree-sitter can't: fail closed, at tree-sitter's error
        if n.type == "ERROR" or n.is_missing:
            r, c = n.start_point
            return Violation(SYNTAX_RULE, "The guard's parser cannot read this line (Python's can): "
                             "write it more plainly.", r + 1, c + 1, lines[r].strip()[:160] if r < len(lines) else "")
    return Violation(SYNTAX_RULE, "The guard's parser cannot read this candidate (Python's can): write it more "
                     "plainly.", 1, 1, "")


def check_source(source: bytes | str, task: "Task", rules: list[Rule] | None = None) -> list[Violation]:
    """Static verdict on one candidate: every violation of the given rules (default: the task's).

    `source` is the file's bytes (a str is taken as its UTF-8 encoding): the child compiles exactly
    these, so bytes another reader would decode differently are refused first (source-encoding).
    Runtime rules are skipped here (the evaluator performs them). An empty list means accepted
    by the static stage; warnings (severity "warning") don't reject.
    """
    if rules is None:
        rules = rules_for_task(task)
    try:
        data = source if isinstance(source, bytes) else source.encode("utf-8")
    except UnicodeEncodeError as e:  # a str with lone surrogates: no file holds it as UTF-8
        return [Violation(ENCODING_RULE, f"character {e.object[e.start]!r} can't be written as UTF-8; "
                          f"{sourcefile.FIX}", 1, 1, "")]
    problem = sourcefile.encoding_problem(data)
    if problem is not None:
        return [Violation(ENCODING_RULE, problem.message, problem.line, problem.col, "")]
    try:
        return _check(data, task, rules)
    except RuleError:
        raise
    except (RecursionError, MemoryError) as e:
        # Fail closed: code too deeply nested to read must not skip the static stage.
        return [Violation(GUARD_RULE, f"The guard could not read this candidate ({type(e).__name__}: "
                          "nesting too deep). Write plainer code: shorter chains and shallower nesting.", 1, 1, "")]
    except Exception as e:  # noqa: BLE001 - a guard bug must not let a candidate skip the stage
        return [Violation(GUARD_RULE, f"The guard failed on this candidate ({type(e).__name__}: {e}); "
                          "this is a warpsmith bug worth reporting. Meanwhile, write plainer code.", 1, 1, "")]


def _text_violations(model, lines: list[str]) -> list[Violation]:
    """Where Python and tree-sitter would read the same text differently (TEXT_RULE): a carriage
    return not followed by a newline ends a line for Python and not for tree-sitter (`# x\rimport os`
    is a comment to one, an import to the other), and Python NFKC-normalizes identifiers (`ｅｖａｌ` is
    `eval` to Python, an unknown name to every rule here). Both are refused rather than modelled."""
    data = model.source
    out: list[Violation] = []
    cr = re.search(rb"\r(?!\n)", data)
    if cr is not None:
        line = data.count(b"\n", 0, cr.start()) + 1
        out.append(Violation(TEXT_RULE, f"a carriage return not followed by a newline at line {line}: Python reads it "
                             "as a line break, the guard as part of the line; end lines with \\n (or \\r\\n)",
                             line, 1, ""))
    seen: set[int] = set()
    for m in re.finditer(rb"[\x80-\xff]+", data):  # only identifiers with non-ASCII characters can change
        n = model.node_at(m.start(), m.end())
        if n is None or n.type != "identifier" or n.id in seen:
            continue
        seen.add(n.id)
        if unicodedata.normalize("NFKC", text(n)) != text(n):
            r, c = n.start_point
            out.append(Violation(TEXT_RULE, f"identifier `{text(n)}` is `{unicodedata.normalize('NFKC', text(n))}` "
                                 "to Python (it normalizes identifiers, the guard does not): write it in that form",
                                 r + 1, c + 1, lines[r].strip()[:160] if r < len(lines) else ""))
    return out


def _check(source: bytes, task: "Task", rules: list[Rule]) -> list[Violation]:
    model = build_model(source)
    lines = model.source.decode("utf-8", "replace").splitlines()
    # Before the syntax check: a lone CR can make tree-sitter fail where Python reads fine.
    odd = _text_violations(model, lines)
    if odd:
        return odd
    bad = _syntax_violation(model)
    if bad is not None:
        return [bad]
    original, smap = model.source, None
    # getattr/hasattr with a literal name are judged as the attribute spelling, by every rule: the
    # rules run on the source with them rewritten (`getattr(torch, "from_file")` -> `torch.from_file`)
    # and report positions in the original.
    desugared = desugar_lookups(model)
    if desugared is not None:
        rewritten = build_model(desugared[0])
        if not rewritten.root.has_error:  # (it parses whenever the original does; if not, judge the original)
            model, smap = rewritten, desugared[1]

    def where(node) -> tuple[int, int]:
        """(line, col), 1-based, in the original source."""
        if smap is None:
            return node.start_point[0] + 1, node.start_point[1] + 1
        off = smap.original(node.start_byte)
        line_start = original.rfind(b"\n", 0, off) + 1
        return original.count(b"\n", 0, off) + 1, len(original[line_start:off].decode("utf-8", "replace")) + 1

    cache: dict = {}
    entry_ids: set[int] | None = None

    def entry_fn_ids() -> set[int]:
        nonlocal entry_ids
        if entry_ids is None:
            entry_ids = _dsl.entry_path_node_ids(model, task.dsl, task.entry, cache)
        return entry_ids

    def is_handle(node) -> bool:
        return _dsl.is_compiled_object(model, task.dsl, task.entry, node, cache)

    ctx = QueryContext(model, entry_fn_ids, is_handle)
    found: list[tuple[Rule, object, str]] = [(r, n, "") for r, n in run_queries(rules, ctx)]
    allowlist = None
    for rule in rules:
        if rule.check in _allow.ALLOW_CHECKS:
            if allowlist is None:  # the base list plus every enforced pack's [allow] table
                allowlist = _allow.build_allowlist(tuple(sorted({a for r in rules for a in r.allow})))
            found += [(rule, h.node, h.detail) for h in _allow.run(rule.check, model, allowlist)]
        elif rule.check:
            found += [(rule, f.node, f.detail)
                      for f in _dsl.run_static_check(rule.check, model, task.dsl, task.entry, cache)]
    # Nothing is skipped: an `if __name__ == "__main__":` block is read like the rest (no-dunder refuses it).
    # Where a more specific rule already names a node, the allowlist's generic line about it is left out.
    specific = {(n.start_byte, n.end_byte) for r, n, _ in found if r.check not in _allow.ALLOW_CHECKS}  # type: ignore[attr-defined]
    out: list[Violation] = []
    seen: set[tuple[str, int, int]] = set()
    for rule, node, detail in found:
        if rule.check in _allow.ALLOW_CHECKS and (node.start_byte, node.end_byte) in specific:  # type: ignore[attr-defined]
            continue
        line, col = where(node)
        if (rule.id, line, col) in seen:
            continue
        seen.add((rule.id, line, col))
        base = rule.message.replace("<entry>", task.entry)
        msg = f"{base} ({detail})" if detail else base
        snippet = lines[line - 1].strip()[:160] if node.type != "module" and line <= len(lines) else ""  # type: ignore[attr-defined]
        out.append(Violation(rule.id, msg, line, col, snippet, rule.severity))
    out.sort(key=lambda v: (v.line, v.col, v.rule))
    return out


def rejected(violations: list[Violation]) -> bool:
    return any(v.severity == "error" for v in violations)


__all__ = ["ENCODING_RULE", "TEXT_RULE", "Violation", "check_source", "rules_for_task", "rejected", "Rule", "RuleError",
           "RUNTIME_CHECKS", "compile_rules", "load_rules_pack", "find_rules_pack", "text"]

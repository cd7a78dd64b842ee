"""`warpsmith check TASK CANDIDATE.py [--json] [--rules ...]`: the static stage alone.

Exit 0: no violation (warnings allowed); 1: violations; 2: bad input (unknown task, unreadable
candidate, broken rules pack, unknown rule to remove).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from harness.authoring.tasks import TaskError, load_task
from harness.invocation import command

if TYPE_CHECKING:
    from harness.evaluate.records import Finding
    from harness.guard import Violation


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "check", help="static checks of a candidate (DSL really launched, no forbidden moves)",
        description="Read a candidate with tree-sitter and report every rule it breaks, before any GPU time.")
    p.add_argument("task", help="task name (kernels/<name>) or path to a task folder")
    p.add_argument("candidate", nargs="?", help="candidate Python file")
    p.add_argument("--list", action="store_true", help="list the rules that apply to TASK (static and runtime) and exit")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--rules", default=None, metavar="ID,...",
                   help="rules packs to use instead of the task's (the DSL pack is always kept); "
                        "+ID adds a pack to the task's, -ID removes a pack or a single rule (write --rules=-ID)")
    p.set_defaults(func=run)


class CandidateUnreadable(Exception):
    """A candidate path that is no file, or a file that isn't UTF-8 text: bad input (exit 2)."""


def read_candidate(path: Path, what: str = "candidate") -> str:
    """The candidate's source, or CandidateUnreadable with one line naming the file and the problem.
    `warpsmith check` and `warpsmith eval` both read their input through this."""
    if path.is_dir():
        raise CandidateUnreadable(f"{path}: is a directory, not a file (give the {what}'s .py path)")
    if not path.exists():
        raise CandidateUnreadable(f"{path}: no such file (give the {what}'s .py path)")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise CandidateUnreadable(f"{path}: cannot read {what}: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CandidateUnreadable(f"{path}: cannot read {what}: not UTF-8 text (byte 0x{data[e.start]:02x} at "
                                  f"offset {e.start}); save it as UTF-8") from None


def violation_lines(path: Path | str, v: Violation | Finding) -> list[str]:
    """One static violation as `file:line:col: rule: message`, then the offending source line.
    `warpsmith check` prints these (of the guard's Violation); `warpsmith eval` prints the same,
    indented (of a verdict's Finding: the same fields)."""
    tag = "" if v.severity == "error" else f" [{v.severity}]"
    lines = [f"{path}:{v.line}:{v.col}: {v.rule}{tag}: {v.message}"]
    if v.snippet:
        lines.append(f"    {v.snippet}")
    return lines


def _split_rules(spec: str | None, task_rules: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(packs replacing task.rules, extra packs, removed ids)."""
    if spec is None:
        return list(task_rules), [], []
    items = [s.strip() for s in spec.split(",") if s.strip()]
    plain = [s for s in items if s[0] not in "+-"]
    extra = [s[1:] for s in items if s[0] == "+"]
    remove = [s[1:] for s in items if s[0] == "-"]
    base = plain if plain else list(task_rules)
    return base, extra, remove


def run(args: argparse.Namespace) -> int:
    # tree-sitter and the rules (~40 ms): not at --help's start (commands/__init__.py)
    from harness.guard import RuleError, check_source, rejected, rules_for_task

    try:
        task = load_task(args.task, check_null=False, reference=False)  # static: task.toml is enough, no torch
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.list:
        return _list(task, args)
    if not args.candidate:
        print("error: a CANDIDATE file is needed (or --list)", file=sys.stderr)
        return 2
    path = Path(args.candidate)
    try:
        source = read_candidate(path)
    except CandidateUnreadable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    base, extra, remove = _split_rules(args.rules, task.rules)
    task.rules = base
    t0 = time.perf_counter()
    try:
        rules = rules_for_task(task, extra=extra, remove=remove)
    except RuleError as e:
        print(f"error: {e}", file=sys.stderr)
        if str(getattr(e, "path", "")).endswith("pack.toml"):
            print(f"  fix that rules pack (`{command('packs validate PATH')}` checks it)", file=sys.stderr)
        return 2
    # Loading and compiling the rules packs is a one-off cost per process; the check itself is
    # what a loop pays per candidate, so the two are reported apart.
    t1 = time.perf_counter()
    try:
        violations = check_source(source, task, rules)
    except RuleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    load_ms = (t1 - t0) * 1000
    elapsed_ms = (time.perf_counter() - t1) * 1000
    bad = rejected(violations)
    if args.json:
        print(json.dumps({
            "accepted": not bad, "stage": "static", "task": task.name, "candidate": str(path),
            "reasons": [v.to_dict() for v in violations],
            "rules": [r.id for r in rules if not r.runtime], "elapsed_ms": round(elapsed_ms, 2),
            "rules_load_ms": round(load_ms, 2),
        }, indent=2))
    else:
        for v in violations:
            for line in violation_lines(path, v):
                print(line)
        n_static = sum(1 for r in rules if not r.runtime)
        verdict = "rejected" if bad else "ok"
        print(f"{verdict}: {len(violations)} violation(s) of {n_static} static rules "
              f"({task.name}, dsl {task.dsl}) in {elapsed_ms:.1f} ms (+{load_ms:.0f} ms loading the rules)",
              file=sys.stderr)
    return 1 if bad else 0


def _list(task, args: argparse.Namespace) -> int:
    # tree-sitter and the rules (~40 ms): not at --help's start (commands/__init__.py)
    from harness.guard import RuleError, rules_for_task
    from harness.guard.rules import describe

    base, extra, remove = _split_rules(args.rules, task.rules)
    task.rules = base
    try:
        rules = rules_for_task(task, extra=extra, remove=remove)
    except RuleError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps([describe(r) for r in rules], indent=2))
        return 0
    for r in rules:
        how = {"query": "static query", "check": f"static check {r.check}", "runtime": f"runtime {r.runtime}"}[r.kind]
        print(f"{r.pack:14s} {r.id:30s} {how}")
    return 0

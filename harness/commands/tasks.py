"""`warpsmith tasks list | show NAME`."""
from __future__ import annotations

import argparse
import sys

from harness.tasks import Task, TaskError, list_tasks, load_task


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list or show kernel tasks")
    tsub = p.add_subparsers(dest="tasks_cmd", metavar="ACTION")
    ls = tsub.add_parser("list", help="every task found (./kernels, $WARPSMITH_KERNELS, built-in)")
    ls.set_defaults(func=cmd_list)
    show = tsub.add_parser("show", help="a task's shapes, tolerances, input contract and files")
    show.add_argument("name")
    show.set_defaults(func=cmd_show)
    p.set_defaults(func=cmd_list)


def cmd_list(args: argparse.Namespace) -> int:
    tasks, errors = list_tasks()
    for t in tasks:
        long = sum(s.long for s in t.shapes)
        print(f"{t.name:<22} {t.dsl:<7} {len(t.shapes)} shapes ({long} long)  {t.summary}")
    for e in errors:
        print(f"warpsmith: {e}", file=sys.stderr)
    return 1 if errors else 0


def cmd_show(args: argparse.Namespace) -> int:
    try:
        t = load_task(args.name)
    except TaskError as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    print(f"{t.name}: {t.summary}\n  folder {t.root}\n  dsl {t.dsl}, entry {t.entry}(...), dtypes {', '.join(t.dtypes)}")
    for dt, tol in t.tolerance.items():
        print(f"  tolerance {dt}: atol {tol.atol}, rtol {tol.rtol}")
    print(f"  rules packs: {', '.join(t.rules) or '-'}; model packs: {', '.join(t.models) or '-'}")
    for label, shapes in (("GPU shapes", t.shapes), ("interpreter shapes", t.interpreter_shapes)):
        print(f"  {label}:")
        for s in shapes:
            dims = ", ".join(f"{k}={v}" for k, v in s.dims.items())
            print(f"    {s.name:<24} {dims}{'  [long]' if s.long else ''}")
    for line in contract_lines(t):
        print(f"  {line}")
    return 0


def contract_lines(t: Task) -> list[str]:
    """The task's input contract in words: how outputs are judged, then one line per argument."""
    c = t.contract
    if not c.declared:
        return ["contract: none declared (inputs as make_inputs makes them, outputs judged per element)"]
    judged = "per element and per row" + (f" (row_rtol {c.row_rtol:g})" if c.row_rtol else "") \
        if c.error == "rows" else "per element"
    inv = "; invariants " + ", ".join(f"{k} ({v:g})" for k, v in c.invariants.items()) if c.invariants else ""
    lines = [f"contract: outputs judged {judged}{inv}"]
    for i in c.inputs:
        if i.dtype in ("int", "bool"):
            lines.append(f"  {i.name}: a Python {i.dtype}")
            continue
        parts = [t.dtypes[0] if i.dtype == "task" else i.dtype, "layouts " + ", ".join(i.layouts)]
        if i.masks:
            parts.append("masks " + ", ".join(i.masks))
        if i.max_abs is not None:
            parts.append("magnitudes " + (f"{i.min_abs:g} to " if i.min_abs is not None else "up to ") + f"{i.max_abs:g}")
        lines.append(f"  {i.name}: " + "; ".join(parts))
    return lines

"""`warpsmith tasks list | show NAME | new NAME --from FILE.py:FUNC | validate NAME|DIR`."""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from harness.authoring.tasks import DSLS, Task, list_tasks, load_task


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tasks", help="list or show kernel tasks")
    tsub = p.add_subparsers(dest="tasks_cmd", metavar="ACTION")
    ls = tsub.add_parser("list", help="every task found (./kernels, $WARPSMITH_KERNELS, built-in)")
    ls.set_defaults(func=cmd_list)
    show = tsub.add_parser("show", help="a task's shapes, tolerances, input contract and files")
    show.add_argument("name")
    show.set_defaults(func=cmd_show)
    new = tsub.add_parser("new", help="a task folder from a PyTorch function: --from FILE.py:FUNC",
                          description="Write a task (task.toml, reference.py, kernel.py) from FUNC, a PyTorch function "
                                      "of FILE.py, and its example inputs: FILE.py's example_inputs() (its int keyword "
                                      "parameters are the dims) or --example. The incumbent is FUNC itself.")
    new.add_argument("name", help="the task's name (its folder: ./kernels/NAME unless --dir)")
    new.add_argument("--from", dest="source", required=True, metavar="FILE.py:FUNC", help="the PyTorch function")
    new.add_argument("--shapes", metavar='"NAME:DIM=V,DIM=V;..."',
                     help="the GPU shapes; dims not given keep the example's values (default: the example's shape)")
    new.add_argument("--example", metavar="EXPR",
                     help="FUNC's arguments as a Python expression, evaluated in FILE.py's namespace with torch "
                          "(default: FILE.py's example_inputs())")
    new.add_argument("--dtypes", metavar="A,B", help="the task's dtypes (default: the example's)")
    new.add_argument("--dir", type=Path, default=None, help="the folder to write (default: ./kernels/NAME)")
    new.add_argument("--dsl", choices=DSLS, default="triton", help="the DSL candidates must use (default: triton)")
    new.add_argument("--incumbent", choices=["auto", "eager", "torch.compile"], default="auto",
                     help="how kernel.py runs FUNC (auto: the faster on this GPU; eager without one)")
    new.add_argument("--interpreter-shapes", metavar='"NAME:DIM=V,...;..."',
                     help="the shapes for Triton's interpreter (default: derived small ones)")
    new.add_argument("--variant", action="append", type=Path, default=[], metavar="KERNEL.py",
                     help="a starting kernel of yours (defining FUNC's name), copied into variants/: the tuner "
                          "searches its knobs; repeatable")
    new.add_argument("--force", action="store_true", help="replace the folder if it exists")
    new.set_defaults(func=cmd_new)
    val = tsub.add_parser("validate", help="every check of a task, every unknown key with its line; exit 1 if invalid")
    val.add_argument("name", help="task name or folder")
    val.set_defaults(func=cmd_validate)
    p.set_defaults(func=cmd_list)


def _follow_up(rest: str) -> str:
    """A command to run next, as the person runs warpsmith (harness/invocation.py)."""
    from harness.invocation import command  # (light; only when a task is made)

    return command(rest)


def cmd_new(args: argparse.Namespace) -> int:
    from harness.authoring.newtask import NewTaskError, Request, create  # torch (seconds): only when a task is made

    # What the task was made by, recorded in its task.toml (the words typed after the program's name).
    made_by = _follow_up("tasks new " + " ".join(shlex.quote(a) for a in sys.argv[3:]) if sys.argv[1:3] == [
        "tasks", "new"] else f"tasks new {args.name} --from {args.source}")
    try:
        m = create(Request(args.name, args.source, args.dir, args.shapes, args.example, args.dtypes, args.dsl,
                           args.incumbent, args.interpreter_shapes, tuple(args.variant), args.force, made_by))
    except NewTaskError as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2

    def dims(d: dict) -> str:
        return ", ".join(f"{k}={v}" for k, v in d.items())

    t = load_task(m.root, check_null=False)
    params = ", ".join(i.name for i in t.contract.inputs)
    print(f"wrote {m.root}: task.toml, reference.py ({m.entry} copied, the source of truth), kernel.py "
          f"(the incumbent: {m.entry} itself)")
    print(f"  entry        {m.entry}({params}): what every candidate defines, in {t.dsl}")
    print(f"  dims         {dims(m.dims)} ({m.dims_how})")
    print(f"  shapes       " + "; ".join(f"{n} ({dims(d)})" for n, d in m.shapes))
    print(f"  interpreter  " + "; ".join(f"{n} ({dims(d)})" for n, d in m.interpreter))
    for why in m.dropped:
        print(f"               left out: {why}")
    print("  held-out     " + ("; ".join(f"{k} in [{lo}, {hi}]" for k, (lo, hi) in m.heldout.items()) or "none"))
    print("  tolerance    " + "; ".join(f"{dt}: atol {a:g}, rtol {r:g}" for dt, (a, r) in m.tolerance.items()))
    print(f"  incumbent    {m.incumbent_why}")
    if m.variants:
        print(f"  variants     {', '.join(m.variants)}: the tuner searches their knobs")
    for note in m.notes:
        print(f"  note: {note}")
    ref = m.root.name if m.root.resolve() == (Path("kernels") / m.root.name).resolve() else shlex.quote(str(m.root))
    print("next:")
    print(f"  {_follow_up(f'tasks validate {ref}')}")
    print(f"  {_follow_up(f'eval {ref} my_kernel.py')}            # a first {t.dsl} kernel of yours, judged against {m.entry}")
    if m.variants:
        print(f"  {_follow_up(f'run {ref}')}                          # the tuner searches your kernels' knobs")
    print(f"  {_follow_up(f'run {ref} --agent anthropic:MODEL')}  # an LLM agent writes kernels"
          + ("" if m.variants else f" (the tuner needs a {t.dsl} kernel to tune: give yours with --variant)"))
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from harness.authoring.task_validate import validate  # runs the reference (torch): only here

    v = validate(args.name)  # (a TaskError: one line and exit 2, in cli.main)
    for e in v.errors:
        print(f"error: {e}")
    for w in v.warnings:
        print(f"warning: {w}")
    if v.ok:
        print(f"ok: {v.ok}")
    return 1 if v.errors else 0


def cmd_list(args: argparse.Namespace) -> int:
    tasks, errors = list_tasks()
    for t in tasks:
        long = sum(s.long for s in t.shapes)
        print(f"{t.name:<22} {t.dsl:<7} {len(t.shapes)} shapes ({long} long)  {t.summary}")
    for e in errors:
        print(f"warpsmith: {e}", file=sys.stderr)
    return 1 if errors else 0


def cmd_show(args: argparse.Namespace) -> int:
    t = load_task(args.name)  # (a TaskError: one line and exit 2, in cli.main)
    print(f"{t.name}: {t.summary}\n  folder {t.root}\n  dsl {t.dsl}, entry {t.entry}(...), dtypes {', '.join(t.dtypes)}")
    if t.source is not None:  # a task made by `tasks new`: what it was made from, what the incumbent is
        print(f"  made from {t.source.function} ({t.source.file or 'its file'}); incumbent: {t.source.function} "
              f"run by PyTorch ({t.source.incumbent})")
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

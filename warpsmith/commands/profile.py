"""`warpsmith profile TASK [CANDIDATE] [--json] [--pack ID]`: memory / compute / launch bound, shape by shape."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from harness.authoring.packs import PackError, discover
from harness.authoring.tasks import load_task


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="per shape: memory-, compute- or launch-bound (bytes and flops vs ceilings)")
    p.add_argument("task", help="task name or folder")
    p.add_argument("candidate", nargs="?", default=None, help="candidate .py (default: the task's kernel.py)")
    p.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    p.add_argument("--no-ncu", action="store_true", help="skip Nsight Compute even when ncu is on PATH")
    p.add_argument("--json", action="store_true", help="print the profile as one JSON object")
    p.add_argument("--pack", metavar="ID", help="without a GPU: the hardware pack whose spec-sheet figures "
                   "give the roofline expectation (default: none; nothing is assumed)")
    p.add_argument("--e2e", action="store_true", help="the task's end-to-end step instead: every kernel's share of "
                   "it, roofline %%, bound, and the step's gain if it reached its roofline")
    p.set_defaults(func=cmd_profile)


def cmd_profile(args) -> int:
    # torch inside, csv (~5 ms): not at --help's start (commands/__init__.py)
    from harness.profiling.profile import format_profile, profile_task

    task = load_task(args.task, check_null=False)  # (a TaskError: one line and exit 2, in cli.main)
    if args.candidate and not Path(args.candidate).is_file():
        print(f"warpsmith: {args.candidate}: no such candidate file", file=sys.stderr)
        return 2
    wanted = task.shape_names(args.shapes) if args.shapes else []
    unknown = [s for s in wanted if s not in {x.name for x in task.shapes}]
    if unknown:
        print(f"warpsmith: {task.toml_path}: no shape(s) {unknown}; known: {[s.name for s in task.shapes]}",
              file=sys.stderr)
        return 2
    pack = None
    if args.pack:
        try:
            pack = discover().get(args.pack)
        except (KeyError, PackError) as e:
            print(f"warpsmith: --pack: {str(e).strip(chr(34) + chr(39))}", file=sys.stderr)
            return 2
        if pack.kind != "hardware":
            print(f"warpsmith: --pack {args.pack}: a {pack.kind} pack, not a hardware pack", file=sys.stderr)
            return 2
    if args.e2e:
        return _step_profile(task, args, pack)
    p = profile_task(task, Path(args.candidate) if args.candidate else None, wanted or None,
                     use_ncu=not args.no_ncu, pack=pack)
    print(json.dumps(p, indent=2, default=str) if args.json else "\n".join(format_profile(p)))
    return 0


def _step_profile(task, args, pack) -> int:
    # ~20 ms, torch inside: not at --help's start (commands/__init__.py)
    from harness.model.e2e import E2EError
    from harness.profiling.profile import pack_ceilings
    from harness.model.step_profile import format_step_profile, profile_step

    ceilings = None
    if pack is not None:
        ceilings, why = pack_ceilings(pack)
        if ceilings is None:
            print(f"warpsmith: --pack {args.pack}: {why}", file=sys.stderr)
            return 2
    try:
        p = profile_step(task, Path(args.candidate) if args.candidate else None, pack_ceilings=ceilings,
                         use_ncu=not args.no_ncu)
    except E2EError as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    print(json.dumps(p.to_json(), indent=2) if args.json else "\n".join(format_step_profile(p)))
    return 0

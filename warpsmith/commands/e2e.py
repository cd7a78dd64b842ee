"""`warpsmith e2e SESSION... [--workload TASK]`: stack sessions' best kernels into one workload.

Each session contributes what `sessions export` writes: its dispatcher when it has per-bucket
keeps, else its best kernel; the workload (a task's e2e.py) runs with none, each alone, and all of them plugged in."""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from harness.sessions.session import Session, SessionError
from harness.authoring.tasks import TaskError, load_task


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("e2e", help="stack several sessions' best kernels into one end-to-end workload and time it")
    p.add_argument("sessions", nargs="+", help="session ids (each may be `latest`, or a unique prefix or part of an id)")
    p.add_argument("--workload", default=None,
                   help="task whose e2e.py to run (default: the first session's task that has one)")
    p.add_argument("--reps", type=int, default=20, help="graph replays per round")
    p.add_argument("--rounds", type=int, default=6, help="interleaved rounds")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_e2e)


def _interpret_without_gpu() -> None:
    """Kernels are loaded in this process: on a machine without a GPU they must be built for
    Triton's interpreter (the env var is read when @triton.jit runs), as the evaluator's child does."""
    import torch  # ~1 s: only when this command runs, not at --help's start

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
        # numpy's warnings about masked-off lanes (-inf - -inf) are the interpreter's, not the person's.
        warnings.filterwarnings("ignore", category=RuntimeWarning, module="triton.runtime.interpreter")
        from harness.interp import patch_bf16_dot  # (light itself, but only the interpreter needs it)

        patch_bf16_dot()


def cmd_e2e(args) -> int:
    _interpret_without_gpu()
    # ~15 ms: not at --help's start (commands/__init__.py)
    from harness.model.e2e import E2EError, format_stack, session_kernel, stack

    kernels, tasks, lines = {}, [], []
    with tempfile.TemporaryDirectory(prefix="warpsmith-e2e-") as tmp:
        try:
            for sid in args.sessions:
                task, fn, what = session_kernel(Session.open(sid), Path(tmp))
                if task.name in kernels:
                    print(f"warpsmith: two sessions of task {task.name}; give one per task", file=sys.stderr)
                    return 2
                kernels[task.name] = fn
                tasks.append(task)
                lines.append(f"  {task.name}: {what} of session {sid}")
            for t in tasks:  # the file is the convention even before task.toml names it
                if not t.e2e and (t.root / "e2e.py").is_file():
                    t.e2e = "e2e.py"
            if args.workload:
                wtask = load_task(args.workload, check_null=False)
                if not wtask.e2e and (wtask.root / "e2e.py").is_file():
                    wtask.e2e = "e2e.py"
            else:
                wtask = next((t for t in tasks if t.e2e), None)
                if wtask is None:
                    print("warpsmith: none of these sessions' tasks names an e2e workload (task.toml `e2e = \"e2e.py\"`); "
                          "pass --workload TASK", file=sys.stderr)
                    return 2
            result = stack(wtask, kernels, reps=args.reps, rounds=args.rounds)
        except (SessionError, TaskError, E2EError) as e:
            print(f"warpsmith: {e}", file=sys.stderr)
            return 2
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print("kernels:\n" + "\n".join(lines))
        print("\n".join(format_stack(result)))
    return 0 if all(r["correct"] for r in result["rows"]) else 1

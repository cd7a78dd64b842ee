"""Stack kernels of several tasks into one end-to-end workload on a GPU and time it.

    PYTHONPATH=. python bench/e2e.py --workload softmax \
        --kernel softmax=kernels/softmax/candidates/onepass.py --kernel rmsnorm=kernels/rmsnorm/kernel.py \
        [--option context=16384 --option batch=64] [--reps 20 --rounds 6] [--json out.json]

A --kernel file is a candidate (defines the task's entry) or an exported dispatcher (same entry).
The workload (the task's e2e.py, see harness/model/e2e.py for the contract) runs with the defaults, with
each kernel alone, and with all of them; each configuration is captured in one CUDA graph and its
replays timed with CUDA events, configurations interleaved round by round. Needs torch + triton only.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.model.e2e import CudaGraphTimer, E2EError, format_stack, load_kernel, stack, wall_timer  # noqa: E402
from harness.authoring.tasks import TaskError, load_task  # noqa: E402


def _value(v: str):
    try:
        return int(v)
    except ValueError:
        return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", required=True, help="task whose e2e.py is the workload")
    ap.add_argument("--kernel", action="append", default=[], help="TASK=FILE (repeat per task)")
    ap.add_argument("--option", action="append", default=[], help="KEY=VALUE passed to the workload's build()")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--dry-run", action="store_true",
                    help="check the plumbing on a CPU: Triton interpreter, tiny sizes, wall clock (not speeds)")
    args = ap.parse_args()
    if args.dry_run:
        import os

        os.environ.setdefault("TRITON_INTERPRET", "1")
    import torch

    if not args.dry_run and not torch.cuda.is_available():
        print("bench/e2e.py needs a CUDA GPU (CUDA-graph timing)", file=sys.stderr)
        return 2
    try:
        wtask = load_task(args.workload, check_null=False)
        if not wtask.e2e:  # the task.toml line may not be there yet: the file is the convention
            wtask.e2e = "e2e.py"
        kernels = {}
        for spec in args.kernel:
            name, _, path = spec.partition("=")
            task = load_task(name, check_null=False)
            kernels[task.name] = load_kernel(task, Path(path), Path(path).stem)
        options = {k: _value(v) for k, _, v in (o.partition("=") for o in args.option)}
        if args.dry_run:
            print("DRY RUN: CPU wall clock of the Triton interpreter; these are not kernel speeds")
        result = stack(wtask, kernels, device="cpu" if args.dry_run else "cuda",
                       timer=wall_timer if args.dry_run else CudaGraphTimer(),
                       reps=2 if args.dry_run else args.reps, rounds=2 if args.dry_run else args.rounds,
                       options=options)
    except (TaskError, E2EError) as e:
        print(f"bench/e2e.py: {e}", file=sys.stderr)
        return 2
    result["gpu"] = "cpu (dry run)" if args.dry_run else torch.cuda.get_device_name(0)
    result["kernels"] = dict(a.partition("=")[::2] for a in args.kernel)
    result["options"] = options
    print(f"{result['gpu']}")
    print("\n".join(format_stack(result)))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0 if all(r["correct"] for r in result["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())

"""Every variant x every configuration of its declared space, on every shape: what a kernel
engineer's sweep finds, as % of the copy bandwidth, to judge the tuner's result against.

    python bench/variant_sweep.py softmax rmsnorm [--budget-s 220] [--workers 12] [--json out.json] [--by PER_SM]
    python bench/variant_sweep.py softmax --interpreter --limit 6      # CPU: correctness of a sample only
    python bench/variant_sweep.py --apply sweep.json                   # write each variant's best as its defaults

How it fits in one device call (launches recorded, configurations that launch the same kernels timed
once, compiled ahead in worker processes) and what it prints: harness/agents/variant_sweep.py.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> int:
    if sys.argv[1:2] == ["--apply"] and len(sys.argv) == 3:
        from harness.agents.variant_sweep import apply
        return apply(Path(sys.argv[2]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+")
    ap.add_argument("--variants", default="", help="comma-separated variant files or stems (default: all listed)")
    ap.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    ap.add_argument("--by", default="", help="comma-separated knobs (PER_SM): each variant's best per shape at each value")
    ap.add_argument("--budget-s", type=float, default=220.0, help="stop timing after this long, report what it has")
    ap.add_argument("--workers", type=int, default=None,
                    help="processes compiling ahead (default: cores - 2, at most 12, on a GPU; none on the interpreter)")
    ap.add_argument("--limit", type=int, default=None, help="at most N configurations per variant")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup-ms", type=int, default=5)
    ap.add_argument("--rep-ms", type=int, default=30)
    ap.add_argument("--interpreter", action="store_true", help="no GPU: the interpreter's shapes, correctness only")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    t_start = time.time()
    if args.interpreter:
        os.environ["TRITON_INTERPRET"] = "1"
    # Imported only now: with --interpreter, TRITON_INTERPRET is set before torch and triton load.
    import torch

    from harness.agents.variant_sweep import SweepError, SweepOptions, sweep
    if not args.interpreter and not torch.cuda.is_available():
        print("bench/variant_sweep.py: no CUDA GPU here; --interpreter checks a sample for correctness only",
              file=sys.stderr)
        return 2
    bw = None
    if not args.interpreter:
        from harness.profiling.measure import copy_bandwidth_Bps
        bw = copy_bandwidth_Bps() / 1e9
    workers = args.workers if args.workers is not None else \
        (0 if args.interpreter else max(1, min(12, (os.cpu_count() or 2) - 2)))
    opts = SweepOptions(interpreter=args.interpreter, variants=[v for v in args.variants.split(",") if v],
                        shapes=[s for s in args.shapes.split(",") if s], by=[k for k in args.by.split(",") if k],
                        limit=args.limit, seed=args.seed, warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)
    try:
        report_all = sweep(args.tasks, opts, t_start + args.budget_s, workers, bw)
    except SweepError as e:
        print(f"bench/variant_sweep.py: {e}", file=sys.stderr)
        return 1
    print(f"sweep took {time.time() - t_start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(report_all, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the DeepSeek V4 attention tasks on a GPU, side by side in one run.

For each task (dsv4_indexer_topk, dsv4_csa_decode, dsv4_hca_decode, dsv4_compress, and the FP8-cache
variant dsv4_csa_decode_fp8) and shape: the reference eager and under torch.compile, the task's
kernel.py, a kept kernel (--kernel), against the HBM roofline, with do_bench (L2 flushed).
What is measured and how: harness/model/dsv4_bench.py.

    PYTHONPATH=. python bench/dsv4.py [--quick] [--tasks dsv4_csa_decode,...] [--no-compile] [--json FILE]
        [--kernel dsv4_csa_decode=BEST.py ...]   # a "best" column: the tuner's (or anyone's) kept kernel

Imports only torch, triton and harness (stdlib): it runs on the bare GPU box.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.model.dsv4_bench import QUICK, TASKS, exit_status, load_best, print_table, run, smoke, sweep  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="DeepSeek V4 attention tasks: eager vs compiled reference vs kernel vs HBM roofline")
    ap.add_argument("--quick", action="store_true", help=f"only shapes {sorted(QUICK)}")
    ap.add_argument("--tasks", default=",".join(TASKS))
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile (saves its compile time)")
    ap.add_argument("--rep-ms", type=int, default=40, help="do_bench rep budget per measurement (ms)")
    ap.add_argument("--json", help="write every row to this file")
    ap.add_argument("--sweep", action="store_true", help="instead: time each kernel.py over a small grid of its "
                    "module-level knobs (BLOCK_N, NUM_WARPS, ...) on a few shapes; correctness checked per config")
    ap.add_argument("--kernel", action="append", default=[], metavar="TASK=FILE",
                    help="a kept kernel for TASK (e.g. the tuner's exported best), timed and checked beside kernel.py")
    ap.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # tests: interpreter shapes on CPU
    args = ap.parse_args(argv)
    try:
        best = load_best(args.kernel)
    except ValueError as e:
        print(f"bench/dsv4.py: {e}", file=sys.stderr)
        return 2
    names = [t.strip() for t in args.tasks.split(",") if t.strip()]
    if args.smoke:
        return smoke(names, best)
    if not torch.cuda.is_available():
        print("bench/dsv4.py: needs a CUDA GPU (on CPU, run tests/dsv4 in the Triton interpreter)", file=sys.stderr)
        return 2
    unknown = [n for n in names if n not in TASKS]
    if unknown:
        print(f"bench/dsv4.py: --tasks: unknown {unknown} (choose from {TASKS})", file=sys.stderr)
        return 2
    if args.sweep:
        return sweep(names, args.rep_ms)
    rows, dropped, bw = run(names, best, args.rep_ms, quick=args.quick, compile=not args.no_compile)
    print_table(rows, bw)
    if args.json:
        Path(args.json).write_text(json.dumps(dict(bandwidth=bw, device=torch.cuda.get_device_name(), rows=rows), indent=1))
    return exit_status(rows, dropped)


if __name__ == "__main__":
    raise SystemExit(main())

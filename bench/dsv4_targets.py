"""Issue 19's targets for the DeepSeek V4 decode baselines, judged on one GPU in one run (< 5 min).

Per task (dsv4_csa_decode, dsv4_hca_decode, dsv4_csa_decode_fp8) and shape: HBM roofline, eager
reference, do_bench, CUDA-graph replay (`graph`, and `cold`: L2 flushed before each call), % of
roofline and issue 19's marks (roof40, launch, fp8); then, while --budget-s lasts, a config sweep, a
split-count sweep and the indexer's MIN_CHUNK. With --variant NAME, instead: each task's
variants/NAME.py beside its baseline, then NAME's points. What is measured and judged, and how:
harness/model/dsv4_targets.py.

    PYTHONPATH=. python bench/dsv4_targets.py [--tasks ...] [--no-sweep] [--shapes NAME,...] [--budget-s S]
                                              [--variant vsplit]

Imports only torch, triton and harness: it runs on the bare GPU box.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.model.dsv4_targets import BUDGET_S, CONTEXT, DECODE, Setup, run, run_variant, smoke  # noqa: E402
from harness.profiling.measure import copy_bandwidth_Bps  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="issue 19: DeepSeek V4 decode baselines against their targets, on a GPU")
    ap.add_argument("--tasks", default=",".join(DECODE + CONTEXT))
    ap.add_argument("--shapes", default="", help="only these shape names (comma-separated)")
    ap.add_argument("--no-sweep", action="store_true")
    ap.add_argument("--rep-ms", type=int, default=25)
    ap.add_argument("--budget-s", type=float, default=BUDGET_S, help="stop sweeping (and measuring) at this many seconds")
    ap.add_argument("--variant", default="", help="instead: kernels/TASK/variants/NAME.py beside each baseline "
                    "(tasks that ship it), then its VARIANT_POINTS")
    ap.add_argument("--smoke", action="store_true", help=argparse.SUPPRESS)  # tests: CPU interpreter
    args = ap.parse_args(argv)
    setup = Setup(budget_s=args.budget_s)  # the budget counts from here
    names = [t for t in args.tasks.split(",") if t]
    if args.smoke:
        return smoke(names, args.variant, not args.no_sweep, args.budget_s)
    if not torch.cuda.is_available():
        print("bench/dsv4_targets.py: needs a CUDA GPU", file=sys.stderr)
        return 2
    bad = [n for n in names if n not in DECODE + CONTEXT]
    if bad:
        print(f"bench/dsv4_targets.py: --tasks: unknown {bad} (choose from {DECODE + CONTEXT})", file=sys.stderr)
        return 2
    only = {s for s in args.shapes.split(",") if s}
    if args.variant:
        return run_variant(setup, args.variant, names, only, copy_bandwidth_Bps(), torch.cuda.get_device_name())
    return run(setup, names, only, args.rep_ms, not args.no_sweep, copy_bandwidth_Bps(), torch.cuda.get_device_name())


if __name__ == "__main__":
    raise SystemExit(main())

"""Can the timing verdict be trusted? Three numbers, from the evaluator's own timing path.

    python bench/timing_trust.py                 # on a CUDA GPU
    python bench/timing_trust.py --simulate      # anywhere: the decision rule on synthetic noise

1. A/A false-keep rate: the same kernel as incumbent and candidate, --trials times (fresh seeds,
   fresh inputs each trial), timed as `warpsmith eval` decides: the parent's clock over batches,
   the incumbent in a child of its own (harness/evaluate/parent_clock.py; --aa-clock child for the
   old interleaved samples in one child); each trial is judged and decided by the evaluator's own
   code (timing_stage.time_shape, runner.timed_verdict: every timing rejection rule, the keep policy).
   A trial is a false keep when that decision is keep twice in a row (the evaluator re-measures a
   would-be keep); a rejection of the same kernel (timer-disagrees, impossible-time...) is a harness
   bug and counted too. Goal: 0 and 0. With --aa-shape all over each task: issue 19's per-task A/A.
2. Spread of repeated medians for a kernel of >= 100 µs: --repeats runs of the same timing on a
   big shape; (max - min) / median of the candidate's medians. Goal: <= 1%.
3. Detection of a real 3% improvement: the incumbent is the baseline plus extra HBM reads (from a
   buffer larger than L2) sized so that it is truly about 3% slower, measured with many samples;
   the rate at which the ordinary rule keeps the faster one is reported.
Everything goes through harness.evaluate's child and timing code (the same process, L2 flush,
input rotation and all-stream sync as `warpsmith eval`); the measuring and the table are
harness/evaluate/timing_trust.py's. Prints a table; --json writes details.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.evaluate.timing_trust import (TrustError, TrustOptions, print_table, run_gpu,  # noqa: E402
                                           run_simulated)


def main(argv: list[str] | None = None) -> int:
    d = TrustOptions()
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default=d.task)
    p.add_argument("--trials", type=int, default=d.trials, help="A/A trials (>= 50)")
    p.add_argument("--samples", type=int, default=d.samples, help="timed samples per side, as `warpsmith eval` uses")
    p.add_argument("--aa-shape", default=d.aa_shape, help="a shape name, or all (round-robin over the task's shapes)")
    p.add_argument("--only-aa", action="store_true", help="the A/A trials alone (no spread, no detection)")
    p.add_argument("--aa-clock", choices=["parent", "child"], default=d.aa_clock,
                   help="parent: the evaluator's decision path (default); child: the old in-child samples")
    p.add_argument("--aa-processes", choices=["setup", "fresh", "swapped"], default=d.aa_processes,
                   help="which processes the parent-clock A/A times (TrustOptions.aa_processes)")
    p.add_argument("--spread-shape", default=d.spread_shape)
    p.add_argument("--repeats", type=int, default=d.repeats)
    p.add_argument("--detect-shape", default=d.detect_shape)
    p.add_argument("--detect-trials", type=int, default=d.detect_trials)
    p.add_argument("--calib-samples", type=int, default=d.calib_samples)
    p.add_argument("--gain-pct", type=float, default=d.gain_pct)
    p.add_argument("--json", type=Path, default=None, help="write the full results here")
    p.add_argument("--simulate", action="store_true", help="no GPU: exercise the decision rule on synthetic noise")
    args = p.parse_args(argv)
    import torch

    if not args.simulate and not torch.cuda.is_available():
        print("timing_trust needs a CUDA GPU (timing is GPU-only); use --simulate to check the decision rule",
              file=sys.stderr)
        return 2
    cfg = TrustOptions(**{f.name: getattr(args, f.name) for f in fields(TrustOptions)})
    try:
        r = run_simulated(cfg) if args.simulate else run_gpu(cfg)
    except TrustError as e:  # its message and status 1, as SystemExit(message) gave before
        print(e, file=sys.stderr)
        return 1
    print_table(r)
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

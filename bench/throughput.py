"""Candidates per minute on each evaluation backend, on the same batch, and whether their verdicts agree.

    PYTHONPATH=. python bench/throughput.py softmax [--backends local,pool,ray] [--n 10]
        [--candidates DIR] [--broken] [--proposals N] [--samples 10] [--shapes A,B]
        [--time-limit S] [--json out.json] [--keep-dir DIR]

Last it prints a short table: candidates a minute, the p50 time to verdict (all, accepted, rejected)
and the p50 of each phase (`phase_costs`), with the held-out checks' cost per candidate.

For each backend, a real session (harness.loop.Loop, script agent replaying the batch, every candidate
reverted so each is measured against the same baseline) runs the whole batch; the figure is
candidates evaluated per minute of wall time from the first proposal to the last decision, worker
start-up excluded (reported beside it). Then each backend's verdicts are compared with the first
backend's, candidate by candidate: accepted, stage, and reason rules must match.

The batch: the prepared candidates in --candidates DIR (NN_name.py files), or --n variants of the
task's kernel.py made by changing its tunables (BLOCK-like constants, num_warps) plus, with
--broken, one deliberately wrong candidate (its result scaled) that every backend must reject.
All of it is harness/profiling/throughput.py's; this script reads the flags.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.profiling.throughput import ThroughputOptions, run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    d = ThroughputOptions()
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("task", nargs="?", default=d.task)
    p.add_argument("--backends", default=d.backends, help="comma-separated --eval specs")
    p.add_argument("--n", type=int, default=d.n, help="batch size when generating variants")
    p.add_argument("--candidates", type=Path, help="a folder of prepared candidates instead")
    p.add_argument("--broken", action="store_true", help="include one deliberately wrong candidate")
    p.add_argument("--proposals", type=int, default=d.proposals)
    p.add_argument("--samples", type=int, default=d.samples, help="timed samples per side per shape (EvalOptions)")
    p.add_argument("--shapes", help="comma-separated shape names to evaluate (default: all for the device)")
    p.add_argument("--time-limit", type=float, default=d.time_limit, metavar="S",
                   help="stop each backend's session after S seconds (the figures cover the verdicts in by then)")
    p.add_argument("--json", type=Path)
    p.add_argument("--keep-dir", type=Path, help="keep the sessions here (default: a temporary folder)")
    a = p.parse_args(argv)
    return run(ThroughputOptions(**vars(a)))


if __name__ == "__main__":
    sys.exit(main())

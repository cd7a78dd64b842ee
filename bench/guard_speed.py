"""How long the static stage takes on a 500-line candidate (goal: under 50 ms).

    python bench/guard_speed.py [--task softmax] [--lines 500] [--repeat 30] [--file CANDIDATE.py]

The candidate is built from the task's baseline kernel.py plus generated autotuned kernels and a
chain of helper functions the entry calls, padded to --lines (harness/guard/speed.py builds and
times it). Reported: the first check in this process (rules packs loaded and queries compiled), and
the median / p90 of --repeat further checks (packs cached, source parsed afresh every time).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.authoring.tasks import load_task  # noqa: E402
from harness.guard.speed import GOAL_MS, build_candidate, time_checks  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="softmax")
    ap.add_argument("--lines", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--file", help="time this candidate instead of a generated one")
    args = ap.parse_args(argv)
    task = load_task(args.task, check_null=False)
    source = Path(args.file).read_text() if args.file else build_candidate(task, args.lines)
    s = time_checks(task, source, args.repeat)
    print(f"task {task.name}: {s.lines}-line candidate, {s.static_rules} static rules, "
          f"{s.violations} violation(s)")
    print(f"first check (loads packs, compiles queries): {s.cold_ms:.1f} ms")
    print(f"static check: median {s.median_ms:.1f} ms, p90 {s.p90_ms:.1f} ms over {s.repeat} runs "
          f"(goal < {GOAL_MS:g} ms); CPU time median {s.cpu_median_ms:.1f} ms")
    return 0 if s.median_ms < GOAL_MS else 1


if __name__ == "__main__":
    sys.exit(main())

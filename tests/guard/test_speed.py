"""The static stage stays fast on a 500-line candidate (harness/guard/speed.py builds it, bench/guard_speed.py
prints the figure; this test only guards against regressions by an order of magnitude on a shared, busy machine)."""
from __future__ import annotations

import time

from harness.guard import check_source, rules_for_task
from harness.guard.speed import build_candidate


def test_500_line_candidate_is_checked_quickly(softmax_task):
    src = build_candidate(softmax_task, 500)
    assert src.count("\n") + 1 >= 500
    rules = rules_for_task(softmax_task)
    assert check_source(src, softmax_task, rules) == []  # warm the caches; the candidate is clean
    cpu = []
    for _ in range(5):
        t = time.process_time()
        check_source(src, softmax_task, rules)
        cpu.append(time.process_time() - t)
    assert sorted(cpu)[2] < 0.25, f"median CPU time {sorted(cpu)[2] * 1000:.0f} ms"

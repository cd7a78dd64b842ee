"""What the static stage costs on a 500-line candidate (goal: under 50 ms; bench/guard_speed.py is the
command line, tests/guard/test_speed.py guards against regressions).

The candidate is built from the task's baseline kernel.py plus generated autotuned kernels and a
chain of helper functions the entry calls (so the call graph and path analysis have work to do),
padded to the lines asked for. Measured: the first check in this process (rules packs loaded and
queries compiled), and the median / p90 of repeated checks (packs cached, source parsed afresh
every time). Nothing about the source is cached between checks.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.guard import check_source, rules_for_task

if TYPE_CHECKING:
    from harness.authoring.tasks import Task

_KERNEL = '''

@triton.autotune(configs=[triton.Config({{"BLOCK": 256}}, num_warps=4),
                          triton.Config({{"BLOCK": 512}}, num_warps=8)], key=["n"])
@triton.jit
def _k{i}(x_ptr, y_ptr, n, scale, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    v = tl.where(v > 0, v * scale, v)
    acc = tl.zeros([BLOCK], tl.float32)
    for _ in range(2):
        acc += tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + offs, (acc / tl.sum(acc, axis=0)).to(y_ptr.dtype.element_ty), mask=mask)


def _stage{i}(x, y):
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
    if n % 2 == 0:
        _k{i}[grid](x, y, n, 1.0)
    else:
        _k{i}[grid](x, y, n, 0.5)
    return y
'''

GOAL_MS = 50.0


def build_candidate(task: "Task", lines: int) -> str:
    # The baseline's entry is renamed and called from a new entry that also runs every generated
    # stage, so the whole module is on the entry path.
    src = task.baseline_path.read_text().replace(f"def {task.entry}(", f"def _baseline_{task.entry}(")
    parts = [src]
    i = 0
    while sum(p.count("\n") for p in parts) < lines - 40 - 2 * (i + 1):
        parts.append(_KERNEL.format(i=i))
        i += 1
    chain = "\n".join(f"    y = _stage{j}(x, y)" for j in range(i))
    parts.append(f"\n\ndef _pipeline(x, y):\n{chain}\n    return y\n")
    parts.append(f"\n\ndef {task.entry}(*inputs):\n    y = _baseline_{task.entry}(*inputs)\n"
                 f"    return _pipeline(inputs[0], y)\n")
    text = "".join(parts)
    n = text.count("\n")
    if n < lines:
        text += "\n" + "".join(f"# padding line {k}\n" for k in range(lines - n - 1))
    return text


@dataclass
class Speed:
    lines: int           # the candidate's
    static_rules: int
    violations: int
    cold_ms: float       # the first check: packs loaded, queries compiled
    median_ms: float     # wall time of the repeated checks
    p90_ms: float
    cpu_median_ms: float
    repeat: int


def time_checks(task: "Task", source: str, repeat: int) -> Speed:
    """The first check of `source` in this process, then `repeat` more with the packs cached."""
    t0 = time.perf_counter()
    rules = rules_for_task(task)
    violations = check_source(source, task, rules)
    cold = (time.perf_counter() - t0) * 1000
    times, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        check_source(source, task, rules_for_task(task))
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    times.sort()
    return Speed(lines=source.count("\n") + 1, static_rules=sum(1 for r in rules if not r.runtime),
                 violations=len(violations), cold_ms=cold, median_ms=statistics.median(times),
                 p90_ms=times[int(0.9 * (len(times) - 1))], cpu_median_ms=statistics.median(cpu), repeat=repeat)

"""How long the static stage takes on a 500-line candidate (goal: under 50 ms).

    python bench/guard_speed.py [--task softmax] [--lines 500] [--repeat 30] [--file CANDIDATE.py]

The candidate is built from the task's baseline kernel.py plus generated autotuned kernels and a
chain of helper functions the entry calls (so the call graph and path analysis have work to do),
padded to --lines. Reported: the first check in this process (rules packs loaded and queries
compiled), and the median / p90 of --repeat further checks (packs cached, source parsed afresh
every time). Nothing about the source is cached between checks.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.guard import check_source, rules_for_task  # noqa: E402
from harness.authoring.tasks import load_task  # noqa: E402

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


def build_candidate(task, lines: int) -> str:
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="softmax")
    ap.add_argument("--lines", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--file", help="time this candidate instead of a generated one")
    args = ap.parse_args(argv)
    task = load_task(args.task, check_null=False)
    source = Path(args.file).read_text() if args.file else build_candidate(task, args.lines)
    n_lines = source.count("\n") + 1

    t0 = time.perf_counter()
    rules = rules_for_task(task)
    violations = check_source(source, task, rules)
    cold = (time.perf_counter() - t0) * 1000
    times, cpu = [], []
    for _ in range(args.repeat):
        t, c = time.perf_counter(), time.process_time()
        check_source(source, task, rules_for_task(task))
        times.append((time.perf_counter() - t) * 1000)
        cpu.append((time.process_time() - c) * 1000)
    times.sort()
    med = statistics.median(times)
    p90 = times[int(0.9 * (len(times) - 1))]
    n_static = sum(1 for r in rules if not r.runtime)
    print(f"task {task.name}: {n_lines}-line candidate, {n_static} static rules, "
          f"{len(violations)} violation(s)")
    print(f"first check (loads packs, compiles queries): {cold:.1f} ms")
    print(f"static check: median {med:.1f} ms, p90 {p90:.1f} ms over {args.repeat} runs (goal < 50 ms); "
          f"CPU time median {statistics.median(cpu):.1f} ms")
    return 0 if med < 50 else 1


if __name__ == "__main__":
    sys.exit(main())

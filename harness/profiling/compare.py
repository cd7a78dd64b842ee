"""A task's per-shape table on this GPU (bench/compare.py is its command line): each timed function
(eager reference, torch.compile(reference), the baseline kernel, Liger-Kernel's op, candidate files)
per shape, with % of the HBM roofline, speedups, and issue 24's targets for the last column.

Timing: harness.profiling.measure.do_bench_us (triton.testing.do_bench's median, L2 flushed between reps by its cache-clearing buffer), on
fresh inputs per shape. The roofline is bytes_moved(dims) / the copy bandwidth measured at startup
(harness.profiling.measure), so % is of what this box can actually do. A report: keep/revert
decisions use harness.evaluate's interleaved timing.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from harness.authoring.tasks import Task
from harness.profiling.measure import do_bench_us


def measure_rows(task: Task, ref: Any, fns: dict[str, Callable], bw_gbs: float,
                 wanted: set[str] | None = None) -> list[dict]:
    """One row a shape (all, or those named in `wanted`): each function's output checked against the
    reference and its time; a function that raises is a cell saying so, not the end of the table."""
    dtype = getattr(torch, task.dtypes[0])
    rows = []
    for shape in task.shapes:
        if wanted and shape.name not in wanted:
            continue
        inputs = ref.make_inputs(shape.dims, dtype, 0, "cuda")
        expected = ref.reference(*inputs)
        row = {"shape": shape.name, "dims": shape.dims}
        floor_us = None
        if hasattr(ref, "bytes_moved"):
            floor_us = ref.bytes_moved(shape.dims, dtype) / (bw_gbs * 1e9) * 1e6
            row["floor_us"] = floor_us
        for name, fn in fns.items():
            try:
                with torch.no_grad():
                    out = fn(*inputs)
                ok = torch.allclose(out.float(), expected.float(), atol=task.tolerance[task.dtypes[0]].atol,
                                    rtol=task.tolerance[task.dtypes[0]].rtol) if hasattr(out, "float") else None
                with torch.no_grad():
                    us = do_bench_us(lambda: fn(*inputs), rep_ms=200, warmup_ms=25)
                row[name] = {"us": us, "correct": bool(ok) if ok is not None else None,
                             "roofline_pct": 100 * floor_us / us if floor_us else None}
            except Exception as e:  # noqa: BLE001 - Liger fails on 128k rows: a cell, not the end of the table
                print(f"{name} fails on {shape.name}: {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}")
                row[name] = {"us": None, "correct": False, "roofline_pct": None, "error": f"{type(e).__name__}"}
                torch.cuda.synchronize()
        rows.append(row)
        del inputs, expected
        torch.cuda.empty_cache()
    return rows


def _us(cell: dict) -> float | None:
    """A cell's time, if it ran and its output was right (a wrong kernel's speed is no figure)."""
    return cell.get("us") if cell.get("us") and cell.get("correct") is not False else None


def print_table(rows: list[dict], names: list[str]) -> None:
    """The per-shape table, the geomeans of the last column over the others, and, where the last is a
    candidate, issue 24's targets: >= 80% of copy bandwidth on every shape whose roofline time is
    >= 10 us, and at or above Liger-Kernel's figure on every shape."""
    head = f"{'shape':<22}" + "".join(f"{n[:12]:>13}" for n in names) + f"{'%roof(best)':>12}" \
        + "".join(f"{'x vs ' + n[:7]:>13}" for n in ("baseline", "compile") if n in names)
    print(head)
    last = names[-1]

    def ratio(r, n):
        return f"{_us(r[n]) / _us(r[last]):>13.2f}" if _us(r[n]) and _us(r[last]) else f"{'-':>13}"

    for r in rows:
        timed = [n for n in names if _us(r[n])]
        best_name = min(timed, key=lambda n: _us(r[n])) if timed else names[0]
        line = f"{r['shape'][:22]:<22}" + "".join(
            f"{_us(r[n]):>13.1f}" if _us(r[n]) else f"{'WRONG' if r[n].get('us') else 'FAILS':>13}" for n in names)
        pct = r[best_name]["roofline_pct"] if timed else None
        line += f"{(f'{pct:.0f}% ' + best_name[:5]) if pct else '-':>12}"
        for n in ("baseline", "compile"):
            if n in names:
                line += ratio(r, n)
        print(line)
    if len(names) > 2:
        for n in names[:-1]:
            both = [r for r in rows if _us(r[n]) and _us(r[last])]
            if both:
                g = math.exp(sum(math.log(_us(r[n]) / _us(r[last])) for r in both) / len(both))
                print(f"geomean speedup of {last} over {n}: {g:.3f}x" + ("" if len(both) == len(rows) else
                                                                         f" ({len(both)} shapes where both ran)"))
    big = [r for r in rows if (r.get("floor_us") or 0) >= 10]
    if big and last not in ("eager", "compile", "baseline", "liger"):
        pcts = [(r["shape"], r[last]["roofline_pct"] if _us(r[last]) else None) for r in big]
        print(f"{last} as % of copy bandwidth (shapes with a roofline time >= 10 us): "
              + " | ".join(f"{n} {f'{p:.0f}%' if p else 'no figure'}" for n, p in pcts)
              + f"; at >= 80%: {sum(bool(p and p >= 80) for _, p in pcts)}/{len(big)}")
        if "liger" in names:
            lig = [r for r in rows if _us(r["liger"])]
            beat = [r for r in lig if _us(r[last]) and _us(r[last]) <= _us(r["liger"])]
            print(f"{last} at or faster than Liger-Kernel on {len(beat)}/{len(lig)} shapes where Liger runs"
                  + "".join(f"; Liger fails on {r['shape']}" for r in rows if not _us(r["liger"])))


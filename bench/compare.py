"""Per-shape table for a task on this GPU: eager reference, torch.compile(reference), the baseline
kernel, Liger-Kernel's op where it imports (softmax, rmsnorm; `--no-liger` skips it), and any
candidate files given, with % of the HBM roofline and speedups.

    python bench/compare.py softmax [--kernel best.py ...] [--shapes a,b] [--json out.json]

Timing: triton.testing.do_bench (median, L2 flushed between reps by its cache-clearing buffer), on
fresh inputs per shape. The roofline is bytes_moved(dims) / the copy bandwidth measured here at
startup (a large device-to-device copy, read + write), so % is of what this box can actually do.
This is a reporting tool; keep/revert decisions use harness.evaluate's interleaved timing.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402
import triton.testing  # noqa: E402

from harness.profiling.measure import copy_bandwidth_Bps  # noqa: E402
from harness.authoring.tasks import load_module, load_task  # noqa: E402


def copy_bandwidth_gbs() -> float:
    """The copy bandwidth every figure's roofline is taken from (harness.profiling.measure), in GB/s."""
    return copy_bandwidth_Bps() / 1e9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("task")
    ap.add_argument("--kernel", action="append", default=[], help="candidate file(s) to time too")
    ap.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile of the reference")
    ap.add_argument("--no-liger", action="store_true", help="skip Liger-Kernel's op")
    ap.add_argument("--json", default=None, help="also write the table as JSON here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench/compare.py needs a CUDA GPU; timing is unavailable in the interpreter", file=sys.stderr)
        return 2
    task = load_task(args.task, check_null=False)
    ref = task.load_reference()
    fns = {"eager": ref.reference}
    if not args.no_compile:
        fns["compile"] = torch.compile(ref.reference, mode="max-autotune-no-cudagraphs")
    fns["baseline"] = getattr(load_module(task.baseline_path, "baseline"), task.entry)
    if not args.no_liger:
        from harness.agents.variant_sweep import liger_fn
        lfn, why = liger_fn(task.name)
        if lfn is not None:
            fns["liger"] = lfn
        else:
            print(f"Liger-Kernel not measured: {why}")
    for i, k in enumerate(args.kernel):
        fns[Path(k).stem] = getattr(load_module(Path(k), f"cand{i}"), task.entry)
    bw = copy_bandwidth_gbs()
    dtype = getattr(torch, task.dtypes[0])
    wanted = {s for s in args.shapes.split(",") if s}
    rows = []
    gpu = torch.cuda.get_device_name(0)
    print(f"{task.name} on {gpu}; copy bandwidth {bw:.0f} GB/s (read+write); times in us (median)")
    for shape in task.shapes:
        if wanted and shape.name not in wanted:
            continue
        inputs = ref.make_inputs(shape.dims, dtype, 0, "cuda")
        expected = ref.reference(*inputs)
        row = {"shape": shape.name, "dims": shape.dims}
        floor_us = None
        if hasattr(ref, "bytes_moved"):
            floor_us = ref.bytes_moved(shape.dims, dtype) / (bw * 1e9) * 1e6
            row["floor_us"] = floor_us
        for name, fn in fns.items():
            try:
                with torch.no_grad():
                    out = fn(*inputs)
                ok = torch.allclose(out.float(), expected.float(), atol=task.tolerance[task.dtypes[0]].atol,
                                    rtol=task.tolerance[task.dtypes[0]].rtol) if hasattr(out, "float") else None
                with torch.no_grad():
                    us = triton.testing.do_bench(lambda: fn(*inputs), warmup=25, rep=200, return_mode="median") * 1e3
                row[name] = {"us": us, "correct": bool(ok) if ok is not None else None,
                             "roofline_pct": 100 * floor_us / us if floor_us else None}
            except Exception as e:  # noqa: BLE001 - Liger fails on 128k rows: a cell, not the end of the table
                print(f"{name} fails on {shape.name}: {type(e).__name__}: {str(e).splitlines()[0][:150] if str(e) else ''}")
                row[name] = {"us": None, "correct": False, "roofline_pct": None, "error": f"{type(e).__name__}"}
                torch.cuda.synchronize()
        rows.append(row)
        del inputs, expected
        torch.cuda.empty_cache()
    print_table(rows, list(fns))
    if args.json:
        Path(args.json).write_text(json.dumps({"task": task.name, "gpu": gpu, "copy_gbs": bw, "rows": rows}, indent=1))
    return 0


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


if __name__ == "__main__":
    sys.exit(main())

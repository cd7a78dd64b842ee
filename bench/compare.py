"""Per-shape table for a task on this GPU: eager reference, torch.compile(reference), the baseline
kernel, Liger-Kernel's op where it imports (softmax, rmsnorm; `--no-liger` skips it), and any
candidate files given, with % of the HBM roofline and speedups.

    python bench/compare.py softmax [--kernel best.py ...] [--shapes a,b] [--json out.json]

Timing: triton.testing.do_bench (median, L2 flushed between reps by its cache-clearing buffer), on
fresh inputs per shape. The roofline is bytes_moved(dims) / the copy bandwidth measured here at
startup (a large device-to-device copy, read + write), so % is of what this box can actually do.
The measuring and the table are harness/profiling/compare.py's; this is a reporting tool, keep/revert
decisions use harness.evaluate's interleaved timing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from harness.profiling.compare import measure_rows, print_table  # noqa: E402
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
    wanted = {s for s in args.shapes.split(",") if s}
    gpu = torch.cuda.get_device_name(0)
    print(f"{task.name} on {gpu}; copy bandwidth {bw:.0f} GB/s (read+write); times in us (median)")
    rows = measure_rows(task, ref, fns, bw, wanted)
    print_table(rows, list(fns))
    if args.json:
        Path(args.json).write_text(json.dumps({"task": task.name, "gpu": gpu, "copy_gbs": bw, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

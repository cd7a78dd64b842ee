"""Issue 23 on the GPU: the CuTe DSL task end to end, through `warpsmith eval --json` as a user runs it.

    PYTHONPATH=. python3 bench/cute.py [--out DIR] [--samples N]

- the task's CuTe DSL baseline (kernels/rmsnorm_cute/kernel.py) against itself, every shape timed:
  per shape the parent clock's µs, the CUDA-graph replay's µs, and each as % of the measured copy
  bandwidth (bytes moved / time / copy bandwidth; the issue's target: >= 80% on the large shapes);
- the honest red-team variant (tests/redteam/candidates/cute_honest_dynamic.py): accepted and timed;
- the cheats: a Triton kernel dressed as CuTe, a torch fallback, a @cute.kernel never launched (all
  static), and a launch around the counter (runtime): each rejected, with its reasons.
Run quickest first (the static rejections, then the baseline), each within what is left of --budget.
Ends with one table; exit 0 iff every verdict is the expected one. Needs nvidia-cutlass-dsl and a GPU
(bench/h200.sh's `cute` section installs the carried wheels first).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
RT = REPO / "tests" / "redteam" / "candidates"
SMALL = "decode 128 x 7168"
# (label, file, extra eval flags, expected rules: None = accepted)
RUNS = [  # the quick static rejections first, then what is timed: a run cut short still says the most
    ("triton dressed as cute", RT / "cute_triton_dressed.py", ["--shapes", SMALL], {"static:allowed-imports"}),
    ("torch fallback", RT / "cute_torch_fallback.py", ["--shapes", SMALL], {"static:torch-compute"}),
    ("kernel never launched", RT / "cute_kernel_never_launched.py", ["--shapes", SMALL], {"static:cute-kernel"}),
    ("baseline", REPO / "kernels" / "rmsnorm_cute" / "kernel.py", [], None),
    ("launch around the counter", RT / "cute_uncounted_launch.py", ["--shapes", SMALL, "--no-static", "--no-time"],
     {"dsl-kernel-runs", "no-introspection"}),
    ("honest variant", RT / "cute_honest_dynamic.py", ["--samples", "20"], None),
]
LARGE_BYTES = 64 * 2**20  # a shape moving more than this is "large" for the 80% target


def evaluate(path: Path, flags: list[str], samples: int, timeout: float) -> tuple[dict | None, str, float]:
    t0 = time.monotonic()
    cmd = [sys.executable, "-m", "warpsmith", "eval", "rmsnorm_cute", str(path), "--json", "--samples", str(samples),
           *flags]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=REPO,
                           env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])))
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout:.0f} s", time.monotonic() - t0
    try:
        return json.loads(r.stdout), r.stderr[-1500:], time.monotonic() - t0
    except json.JSONDecodeError:
        return None, f"rc={r.returncode}: {(r.stdout + r.stderr)[-1500:]}", time.monotonic() - t0


def bandwidth_rows(v: dict) -> list[str]:
    import torch

    from harness.authoring.tasks import load_task

    ref = load_task(REPO / "kernels" / "rmsnorm_cute").load_reference()
    bw = (v.get("device_info") or {}).get("copy_bw_Bps")
    out = [f"  copy bandwidth measured: {bw / 1e12:.2f} TB/s" if bw else "  copy bandwidth: not measured",
           f"  {'shape':22} {'MB':>7} {'µs':>9} {'graph µs':>9} {'% copy':>7} {'% copy (graph)':>14}  ok"]
    for s in v["shapes"]:
        nbytes = ref.bytes_moved(s["dims"], torch.bfloat16)

        def pct(us: float | None) -> str:
            return f"{nbytes / (us * 1e-6) / bw * 100:.0f}" if us and bw else "-"

        big = " (large)" if nbytes > LARGE_BYTES else ""
        cu, gu = s.get("candidate_us"), s.get("candidate_graph_us")
        out.append(f"  {s['name'][:22]:22} {nbytes / 1e6:7.1f} {cu or 0:9.1f} {gu or 0:9.1f} {pct(cu):>7} "
                   f"{pct(gu):>14}  {'yes' if s['correct'] else 'NO'}{big}")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", REPO / "h200-out")))
    p.add_argument("--samples", type=int, default=30, help="timed samples per side per shape")
    p.add_argument("--timeout", type=float, default=150, help="seconds for one evaluation")
    p.add_argument("--budget", type=float, default=260, help="seconds for all of them (later ones get what is left)")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    from harness.authoring.dsl_support import dsl_problem, local_gpu
    from harness.authoring.tasks import load_task

    problem = dsl_problem(load_task(REPO / "kernels" / "rmsnorm_cute"), local_gpu())
    if problem:
        print(f"bench/cute.py: {problem}", file=sys.stderr)
        return 2
    import cutlass

    print(f"nvidia-cutlass-dsl {getattr(cutlass, '__version__', '?')} from {Path(cutlass.__file__).parent}", flush=True)
    summary, failures = [], 0
    t0 = time.monotonic()
    for label, path, flags, expect in RUNS:
        left = args.budget - (time.monotonic() - t0)
        if left < 20:
            failures += 1
            summary.append(f"{label:26} {'':36} NOT RUN (out of time)  FAIL")
            continue
        v, err, wall = evaluate(path, flags, args.samples, min(args.timeout, left))
        if v is None:
            failures += 1
            summary.append(f"{label:26} {'accepted' if expect is None else ','.join(sorted(expect)):36} "
                           f"NO VERDICT ({err.splitlines()[-1] if err else ''})  FAIL")
            print(f"-- {label}: no verdict: {err}", flush=True)
            continue
        (args.out / f"cute_{path.stem}.json").write_text(json.dumps(v, indent=1, default=str))
        rules = {r["rule"] for r in v["reasons"]}
        ok = v["accepted"] if expect is None else (not v["accepted"] and bool(rules & expect))
        failures += not ok
        got = "accepted" if v["accepted"] else ",".join(sorted(rules))
        summary.append(f"{label:26} {'accepted' if expect is None else ' | '.join(sorted(expect)):36} "
                       f"{got[:60]:60} {wall:5.0f} s  {'PASS' if ok else 'FAIL'}")
        print(f"-- {label}: {'ACCEPTED' if v['accepted'] else 'REJECTED at ' + v['stage']} in {wall:.0f} s "
              f"(geomean {v.get('geomean_speedup')})", flush=True)
        for r in v["reasons"][:5]:
            print(f"   - {r['rule']}: {r['message'].splitlines()[0][:220]}", flush=True)
        if v["accepted"] and v["shapes"]:
            print("\n".join(bandwidth_rows(v)), flush=True)
    print("\n== CuTe DSL on this GPU (issue 23)")
    print("\n".join(summary))
    print(f"{len(RUNS) - failures}/{len(RUNS)} verdicts as expected")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())

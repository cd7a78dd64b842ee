"""Run the red-team catalog on a real GPU without pytest (the GPU box has no pytest) and print a table.

    PYTHONPATH=. python3 tests/redteam/gpu_suite.py [--all] [--workers 4] [--json out.json]

Default selection: every `Device: gpu` cheat, every honest variant, and the CPU cheats whose
GPU behaviour differs (allocator poisoning, streams, threads, channel), all on one small shape.
Exit 0 iff every verdict is what the catalog expects.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1]))

from redteam_catalog import Cheat, all_cheats, check, dsl_missing  # noqa: E402

from harness.evaluate import EvalOptions, evaluate  # noqa: E402
from harness.authoring.tasks import load_task  # noqa: E402

ALSO_ON_GPU = {"half_rows_stale", "scratch_uninit", "decoy_kernel", "forged_fd", "leftover_thread",
               "tensor_subclass", "inplace_alias", "os_exit", "torch_fallback", "patch_timer", "write_task_files",
               # the sandbox on the GPU box (device nodes bound, its own Triton cache)
               "survivor_pty", "survivor_double_fork", "escape_writes", "credential_files", "network_exfil",
               "harness_source_rewrite", "hidden_triton_op_torch"}
# Timing-sensitive: run one at a time after the rest.
ALONE = {"gpu_slow_incumbent", "gpu_counter_skip", "gpu_slow_incumbent_modules", "gpu_call_count", "gpu_ptr_cache", "gpu_capture_skip", "gpu_forged_figures",
         "gpu_incumbent_sabotage", "gpu_background_spin"}
OPTIONS = {"hang": {"run_timeout_s": 20}, "host_oom": {"mem_cap_gb": 4.0, "run_timeout_s": 120}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--all", action="store_true", help="every candidate of the catalog")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--shape", default="4k x 4k")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--only", default="", help="comma-separated candidate names")
    args = p.parse_args(argv)
    only = {n.strip() for n in args.only.split(",") if n.strip()}
    cheats = [c for c in all_cheats()
              if (c.name in only if only else
                  args.all or c.device == "gpu" or c.expect == ["accepted"] or c.name in ALSO_ON_GPU)]
    for c in [c for c in cheats if dsl_missing(c)]:  # a CuTe DSL candidate without nvidia-cutlass-dsl here
        print(f"skipped {c.name}: {dsl_missing(c)}", flush=True)
        cheats.remove(c)
    tmp = Path(tempfile.mkdtemp(prefix="warpsmith-redteam-"))
    tasks = {}
    for c in cheats:  # a task copy each: a cheat that writes task files can't affect a neighbour
        shutil.copytree(HERE.parents[1] / "kernels" / c.task, tmp / c.name / c.task,
                        ignore=shutil.ignore_patterns("__pycache__"))
        tasks[c.name] = load_task(tmp / c.name / c.task)
    before = {n: t.file_hashes() for n, t in tasks.items()}
    os.environ["ANTHROPIC_API_KEY"] = "WARPSMITH_CANARY_anthropic"

    def one(c: Cheat) -> tuple[Cheat, dict, float]:
        t0 = time.monotonic()
        shape = args.shape if c.task == "softmax" else tasks[c.name].shapes[0].name  # (--shape: softmax's)
        v = evaluate(tasks[c.name], c.path, options=EvalOptions(shapes=[shape], static=c.full, samples=20,
                                                       **OPTIONS.get(c.name, {})))
        return c, v, time.monotonic() - t0

    failures = 0
    rows = []

    def report(c: Cheat, v: dict, wall: float) -> None:
        # Printed as each verdict lands: a run cut short by its time limit still shows what it did.
        nonlocal failures
        problem = check(c, v)
        if "WARPSMITH_CANARY" in repr(v):
            problem = "canary credential leaked into the verdict"
        failures += problem is not None
        got = "accepted" if v["accepted"] else ",".join(sorted({r["rule"] for r in v["reasons"]}))
        rec = (v.get("recommendation") or {}).get("action", "-")
        print(f"{c.name:26} {', '.join(c.expect)[:40]:40} {got[:52]:52} {rec:6} {wall:5.1f}  {'PASS' if not problem else 'FAIL'}",
              flush=True)
        if problem:
            print(f"    {problem}")
            for r in v["reasons"][:4]:
                print(f"    - {r['rule']}: {r['message'].splitlines()[0][:200]}")
            if v.get("output"):
                print("    output tail: " + v["output"][-600:].replace("\n", "\n    "))
        rows.append({"name": c.name, "expect": c.expect, "accepted": v["accepted"], "stage": v["stage"],
                     "reasons": v["reasons"], "shapes": v["shapes"], "notes": v.get("notes"), "wall_s": wall,
                     "device": v["device"], "phases_s": v.get("phases_s"), "ok": problem is None})
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1, default=str))

    # Timing-sensitive cheats run alone afterwards: parallel neighbours would blur their timing.
    alone = [c for c in cheats if c.name in ALONE or c.expect == ["accepted"]]
    together = [c for c in cheats if c not in alone]
    print(f"{len(cheats)} candidates on {args.shape!r}: {len(together)} {args.workers} at a time, then "
          f"{len(alone)} alone", flush=True)
    print(f"{'candidate':26} {'expected':40} {'verdict':52} {'rec':6} {'s':>5}  ok", flush=True)
    with ThreadPoolExecutor(args.workers) as pool:
        for fut in as_completed([pool.submit(one, c) for c in together]):
            report(*fut.result())
    for c in alone:
        report(*one(c))
    results = rows
    hashes_ok = all(t.file_hashes() == before[n] for n, t in tasks.items())
    print(f"{len(results) - failures}/{len(results)} as expected; task files intact: {hashes_ok}")
    return 0 if failures == 0 and hashes_ok else 1


if __name__ == "__main__":
    sys.exit(main())

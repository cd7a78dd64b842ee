"""Do one GPU's timings hold while the box's other GPUs are busy? (the multi-GPU run's last check)

    PYTHONPATH=. python3 bench/busy_neighbours.py softmax [--repeats 3] [--shapes A,B] [--samples 40]
        [--gpu 0] [--json out.json]

On GPU `--gpu`, `warpsmith eval` of the task's baseline against itself runs `--repeats` times with
the other GPUs idle, then as many times with every other GPU kept busy by a load process pinned to it
(back-to-back bf16 matmuls and 1 GiB device copies: HBM, SMs, power and the host's PCIe/NVLink
traffic of a neighbour at full tilt, worse than a neighbouring evaluation). For each shape it prints
the median candidate time alone and busy, their difference, and the noise band the evaluator
measured: the pool backend's premise is that the difference stays inside the band.
Needs at least two GPUs; exits 2 otherwise.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LOAD = """
import sys, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
print("ready", flush=True)
while True:
    for _ in range(8):
        a @ a
    y.copy_(x)
    torch.cuda.synchronize()
"""


def gpu_count() -> int:
    """Visible GPUs, asked in a child so this process's CUDA context stays on one GPU."""
    r = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.device_count())"],
                       capture_output=True, text=True)
    try:
        return int(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def start_loads(gpus: list[str]) -> list[subprocess.Popen]:
    procs = []
    for g in gpus:
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=g)
        procs.append(subprocess.Popen([sys.executable, "-c", LOAD], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, text=True))
    for p, g in zip(procs, gpus):
        if p.stdout.readline().strip() != "ready":  # allocated and about to loop
            stop_loads(procs)
            raise SystemExit(f"busy_neighbours: the load process on GPU {g} did not start")
    time.sleep(2.0)  # let clocks and power settle under load
    return procs


def stop_loads(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def measure(task, repeats: int, opts) -> dict[str, dict]:
    """Per shape: candidate medians of each repeat and the noise bands."""
    from harness.evaluate import evaluate

    out: dict[str, dict] = {}
    for _ in range(repeats):
        v = evaluate(task, task.baseline_path, task.baseline_path, options=opts)
        if not v.get("timing_available"):
            raise SystemExit(f"busy_neighbours: no timing: {[r['message'][:200] for r in v['reasons']]}")
        for s in v["shapes"]:
            d = out.setdefault(s["name"], {"us": [], "band": []})
            d["us"].append(s["candidate_us"])
            d["band"].append(s["noise_pct"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("task", nargs="?", default="softmax")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--shapes", default="", help="comma-separated shape names (default: all)")
    p.add_argument("--samples", type=int, default=40)
    p.add_argument("--gpu", default="0", help="the GPU measured (physical id)")
    p.add_argument("--json", type=Path, default=None)
    a = p.parse_args(argv)
    n = gpu_count()
    if n < 2:
        print(f"busy_neighbours: needs at least 2 GPUs, this machine has {n}", file=sys.stderr)
        return 2
    others = [str(i) for i in range(n) if str(i) != a.gpu]
    os.environ["CUDA_VISIBLE_DEVICES"] = a.gpu  # this process and its evaluation children: one GPU

    from harness.evaluate import EvalOptions
    from harness.authoring.tasks import load_task

    task = load_task(a.task)
    opts = EvalOptions(static=False, samples=a.samples, remeasure_big_wins=False, spare_child=False,
                       shapes=[s for s in a.shapes.split(",") if s] or None)
    alone = measure(task, a.repeats, opts)
    loads = start_loads(others)
    try:
        busy = measure(task, a.repeats, opts)
    finally:
        stop_loads(loads)
    rows, ok = [], True
    print(f"{a.task} on GPU {a.gpu}, {len(others)} other GPU(s) loaded; {a.repeats} evaluations each, median of "
          f"their medians (µs)")
    print(f"  {'shape':<22} {'alone':>9} {'busy':>9} {'diff %':>7} {'band %':>7}  within")
    for name, d in alone.items():
        al, bu = statistics.median(d["us"]), statistics.median(busy[name]["us"])
        band = max(statistics.median(d["band"]), statistics.median(busy[name]["band"]))
        diff = (bu / al - 1) * 100
        within = abs(diff) <= band
        ok &= within
        rows.append({"shape": name, "alone_us": al, "busy_us": bu, "diff_pct": diff, "band_pct": band,
                     "within": within, "alone_all": d["us"], "busy_all": busy[name]["us"]})
        print(f"  {name[:22]:<22} {al:9.1f} {bu:9.1f} {diff:7.2f} {band:7.2f}  {'yes' if within else 'NO'}")
    if a.json:
        a.json.write_text(json.dumps({"task": a.task, "gpu": a.gpu, "others": others, "rows": rows}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

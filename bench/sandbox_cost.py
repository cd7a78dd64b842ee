"""What the OS sandbox costs per candidate: a child started with and without it, and a whole
`warpsmith eval` of the task's baseline with and without it. Goal: under 0.3 s per candidate.

    python bench/sandbox_cost.py [--task softmax] [--spawns 3] [--no-eval] [--json out.json]

On a machine without a GPU the children run in Triton's interpreter (on one small shape); the
start-up figure is the same kind of number. Runs alternate (on, off, on, off...) so drift hits
both sides alike.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.evaluate import EvalOptions, evaluate  # noqa: E402
from harness.evaluate.runner import ChildProcess  # noqa: E402
from harness.evaluate.sandbox import probe  # noqa: E402
from harness.authoring.tasks import load_task  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--task", default="softmax")
    p.add_argument("--spawns", type=int, default=3, help="child starts per side")
    p.add_argument("--evals", type=int, default=1, help="whole evaluations of the baseline per side")
    p.add_argument("--no-eval", action="store_true")
    p.add_argument("--shapes", default=None, help="comma-separated shapes for the evaluations (default: all)")
    p.add_argument("--samples", type=int, default=20)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    import torch

    works, why, true_s = probe()
    if not works:
        print(f"sandbox unavailable here: {why}", file=sys.stderr)
        return 2
    on_gpu = torch.cuda.is_available()
    task = load_task(args.task)
    shapes = [s.strip() for s in args.shapes.split(",")] if args.shapes else (None if on_gpu else ["odd rows"])
    out: dict = {"task": task.name, "device": torch.cuda.get_device_name(0) if on_gpu else "cpu (interpreter)",
                 "bwrap_true_s": round(true_s, 4), "start_s": {"on": [], "off": []}, "eval": {"on": [], "off": []}}
    for _ in range(args.spawns):
        for side in ("on", "off"):
            t0 = time.monotonic()
            c = ChildProcess(task, on_gpu, EvalOptions(on_gpu=on_gpu, sandbox=side == "on", spare_child=False))
            hello = c.start(300)
            out["start_s"][side].append(round(time.monotonic() - t0, 3))
            c.close()
            if not hello.get("ok"):
                print(f"child start failed ({side}): {hello.get('error')}\n{c.output()[-2000:]}", file=sys.stderr)
                return 1
    med = {k: statistics.median(v) for k, v in out["start_s"].items()}
    # Printed before the evaluations, so a time-boxed run still reports the start cost.
    print(f"  child start (median of {args.spawns})    on {med['on']:.2f} s   off {med['off']:.2f} s   "
          f"cost {med['on'] - med['off']:+.3f} s   goal < 0.3 s", flush=True)
    if not args.no_eval:
        for _ in range(args.evals):
            for side in ("on", "off"):
                v = evaluate(task, task.baseline_path, options=EvalOptions(
                    on_gpu=on_gpu, sandbox=side == "on", spare_child=False, shapes=shapes, samples=args.samples))
                out["eval"][side].append({"wall_s": v["wall_s"], "accepted": v["accepted"], "sandbox": v["sandbox"],
                                          "speedup": v["geomean_speedup"], "phases_s": v.get("phases_s"),
                                          "reasons": v["reasons"][:3], "output": v.get("output", "")[-1500:]})

    med = {k: statistics.median(v) for k, v in out["start_s"].items()}
    out["start_cost_s"] = round(med["on"] - med["off"], 3)
    print(f"sandbox cost — {task.name} on {out['device']}")
    print(f"  bwrap ... true                {true_s:.3f} s")
    print(f"  child start (median of {args.spawns})    on {med['on']:.2f} s   off {med['off']:.2f} s   "
          f"cost {out['start_cost_s']:+.3f} s   goal < 0.3 s")
    if out["eval"]["on"]:
        w = {k: statistics.median(e["wall_s"] for e in v) for k, v in out["eval"].items()}
        out["eval_cost_s"] = round(w["on"] - w["off"], 3)
        acc = "/".join(str(all(e["accepted"] for e in out["eval"][k])) for k in ("on", "off"))
        print(f"  eval of the baseline          on {w['on']:.1f} s   off {w['off']:.1f} s   cost "
              f"{out['eval_cost_s']:+.2f} s   (accepted on/off: {acc}; each side a cold Triton cache of its own)")
        for side in ("on", "off"):
            for e in out["eval"][side]:
                if not e["accepted"]:
                    print(f"    {side}: " + "; ".join(f"{r['rule']}: {r['message'][:160]}" for r in e["reasons"]))
                    print("    output tail: " + e["output"][-600:].replace("\n", "\n    "))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

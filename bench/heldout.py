"""Shape-fitted and contract-blind kernels through `warpsmith eval` on every GPU shape (issue 25, 17).

    PYTHONPATH=. python3 bench/heldout.py [--workers 3] [--only a,b] [--json out.json] [--timeout 200]

The candidates: every red-team candidate whose catalog entry expects `heldout-incorrect` or
`hard-case-incorrect` (tests/redteam/candidates: no tail masks, a row-count table, no max shift,
an RMSNorm fitted to widths % 8 or without eps or squaring in fp16, a DeepSeek V4 HCA decode
that assumes a full window), plus each of their tasks' baselines as the control that must pass.
Each runs as a person would run it, `python -m warpsmith eval TASK FILE --json --no-time`, on all the
task's GPU shapes (timing off: these are about correctness; the listed shapes pass, so only the
held-out shapes and hard inputs can reject them). Prints one row per file: accepted, the rule,
and the held-out shape or hard case the verdict names. Exit 0 iff every verdict is as expected.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "redteam"))

from redteam_catalog import all_cheats  # noqa: E402

RULES = {"heldout-incorrect", "hard-case-incorrect"}


def selection(only: set[str]) -> list[tuple[str, str, Path, list[str]]]:
    """(name, task, file, expected rules or ["accepted"])."""
    fitted = [c for c in all_cheats() if RULES & {a.strip() for e in c.expect for a in e.split("|")}]
    rows = [(c.name, c.task, c.path, c.expect) for c in fitted]
    for task in dict.fromkeys(c.task for c in fitted):
        rows.append((f"{task} baseline", task, REPO / "kernels" / task / "kernel.py", ["accepted"]))
    return [r for r in rows if not only or r[0] in only]


def run_one(task: str, path: Path, timeout: float) -> tuple[dict | None, float, str]:
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-m", "warpsmith", "eval", task, str(path), "--json", "--no-time"],
                           cwd=REPO, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, time.monotonic() - t0, f"no verdict within {timeout:.0f} s"
    try:
        return json.loads(p.stdout), time.monotonic() - t0, ""
    except json.JSONDecodeError:
        return None, time.monotonic() - t0, f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-300:]}"


def named(v: dict) -> str:
    """The shape or case the first rejecting reason names (its [...] tag)."""
    for r in v.get("reasons", []):
        m = re.match(r"\[(.*?)\] ", r.get("message", ""))
        if m:
            return m.group(1)
    return "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated names (candidate names, or 'TASK baseline')")
    ap.add_argument("--timeout", type=float, default=200, help="seconds per evaluation")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    rows = selection({x.strip() for x in a.only.split(",") if x.strip()})
    print(f"{len(rows)} files, {a.workers} at a time, `warpsmith eval TASK FILE --json --no-time`", flush=True)
    results = []

    def one(row):
        name, task, path, expect = row
        v, wall, err = run_one(task, path, a.timeout)
        return row, v, wall, err

    with ThreadPoolExecutor(a.workers) as pool:
        for (name, task, path, expect), v, wall, err in pool.map(one, rows):
            rules = sorted({r["rule"] for r in v["reasons"]}) if v else []
            if v is None:
                ok, got = False, err
            elif expect == ["accepted"]:
                ok, got = bool(v["accepted"]), "accepted" if v["accepted"] else ",".join(rules)
            else:
                ok = not v["accepted"] and all(rules_ok & set(rules) for rules_ok in
                                               ({x.strip() for x in e.split("|")} for e in expect))
                got = ",".join(rules)
            n_held = len(v.get("heldout") or []) if v else 0
            n_hard = len(v.get("hard_cases") or []) if v else 0
            heldout_s = (v.get("phases_s") or {}).get("heldout") if v else None
            results.append({"name": name, "task": task, "file": str(path.relative_to(REPO)), "expect": expect,
                            "accepted": v["accepted"] if v else None, "rules": rules, "named": named(v) if v else err,
                            "heldout_shapes": n_held, "hard_inputs": n_hard, "heldout_s": heldout_s,
                            "wall_s": round(wall, 1), "ok": ok, "device": v.get("device") if v else None})
            print(f"{name:26} {task:18} {'yes' if v and v['accepted'] else 'no':3} {got[:40]:40} "
                  f"{wall:5.1f}s  {'PASS' if ok else 'FAIL'}", flush=True)
    print(f"\n{'file':58} {'accepted':8} {'rule':20} {'held-out/hard':13} {'that s':7}  shape or case named")
    for r in results:
        print(f"{r['file'][:58]:58} {str(r['accepted']):8} {(','.join(r['rules']) or '-')[:20]:20} "
              f"{r['heldout_shapes']:>5}/{r['hard_inputs']:<7} {r['heldout_s'] or 0:7.1f}  {r['named'][:90]}")
    bad = [r["name"] for r in results if not r["ok"]]
    print(f"{len(results) - len(bad)}/{len(results)} as expected" + (f"; not: {', '.join(bad)}" if bad else "")
          + (f" (device: {results[0]['device']})" if results else ""))
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())

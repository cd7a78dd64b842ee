"""softmax's and rmsnorm's variants/split.py on two CUDA streams at once, at PER_SM 1, 2 and 4: each
call's programs wait for each other through a scratch kept per (device, stream), so two calls in
flight together must not mix their partials. The interpreter can't show this (one piece a row, no
streams): it needs a GPU.

    PYTHONPATH=. python bench/split_streams.py [--rounds 10]

Per task and PER_SM: `rounds` pairs of calls, one on each of two streams (a 128k-wide and a 32k-wide
input, both on the split path), every output kept and checked against the reference afterwards.
Prints one line each, `TASK PER_SM=N: K/K outputs correct on two streams (... ms)`, and exits 1 if
any is wrong (NaN where a wait gave up counts as wrong).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# Knobs that let PER_SM programs an SM be resident (warps and registers within an SM's; see the
# files' require lines), with rows of 32k split too (MAX_ONEPASS 16384).
CONFIGS = {1: {"LONG_WARPS": 16, "MAX_PIECE": 16384}, 2: {"LONG_WARPS": 8, "MAX_PIECE": 8192},
           4: {"LONG_WARPS": 4, "MAX_PIECE": 4096}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print("bench/split_streams.py: no CUDA GPU here (two streams of split calls need one)", file=sys.stderr)
        return 2
    from harness.authoring.tasks import load_module, load_task
    bad = 0
    for name in ("softmax", "rmsnorm"):
        task = load_task(name, check_null=False)
        ref = task.load_reference()
        tol = task.tolerance["bfloat16"]
        inputs = [ref.make_inputs({"rows": 96, "cols": 131072}, torch.bfloat16, 1, "cuda"),
                  ref.make_inputs({"rows": 384, "cols": 32768}, torch.bfloat16, 2, "cuda")]
        expected = [ref.reference(*x) for x in inputs]
        for per_sm, knobs in CONFIGS.items():
            mod = load_module(task.root / "variants/split.py", f"split_streams_{name}_{per_sm}")
            for k, v in {**knobs, "PER_SM": per_sm, "MAX_ONEPASS": 16384}.items():
                setattr(mod, k, v)
            fn = getattr(mod, task.entry)
            for x in inputs:  # compiled before the streams race
                fn(*x)
            torch.cuda.synchronize()
            streams = [torch.cuda.Stream(), torch.cuda.Stream()]
            outs: list[list] = [[], []]
            t0 = time.time()
            for _ in range(args.rounds):
                for i, s in enumerate(streams):
                    with torch.cuda.stream(s):
                        outs[i].append(fn(*inputs[i]))
            torch.cuda.synchronize()
            ms = (time.time() - t0) * 1e3
            ok = sum(bool(torch.isfinite(o.float()).all()) and torch.allclose(o.float(), e.float(), atol=tol.atol,
                                                                             rtol=tol.rtol)
                     for i, e in enumerate(expected) for o in outs[i])
            total = 2 * args.rounds
            bad += total - ok
            print(f"{name} PER_SM={per_sm}: {ok}/{total} outputs correct on two streams ({ms:.0f} ms)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

"""Where a DeepSeek V4 decode kernel's time goes, without hardware counters: knock-out variants.

Each variant is the task's kernel.py with one stage removed or changed by a text edit (a copy in a
temporary folder; the kernel file is never touched): no QK^T dot, no P.V dot, no gather (contiguous
rows instead of indices[t]), no rescale of the accumulator, inputs whose indices all hit the same
64 rows (L2-resident), other BLOCK_H / BLOCK_N / stages / warps / splits (KNOBS set the module's
constants, whatever they are now). Each is timed the same way (CUDA graph of 20 calls, L2 flushed
before each call, the flush's own time subtracted) on the chosen shapes; the differences say what a
step costs.
Wrong outputs are expected for the knock-outs (they change the maths) and are not checked.

    python bench/dsv4_knockout.py [--task dsv4_csa_decode] [--shapes "flash 8k x128,pro 8k x128"]
                                  [--only base,noqk] [--ncu]

--ncu: run only the base kernel's first shape once more at the end, for Nsight Compute to catch.
(METHOD.md's advice: "time variants that leave one stage out or do it twice, and take differences".)
"""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.model.dsv4_targets import compiled_stats  # noqa: E402
from harness.profiling.measure import graph_us, l2_flush  # noqa: E402
from harness.authoring.tasks import load_module, load_task  # noqa: E402

# (name, [(old, new), ...]) edits of kernel.py; every `old` must occur (a stale edit fails loudly).
DOT_QK = "s = tl.dot(q, tl.trans(kv))"
DOT_PV = "acc = tl.dot(p.to(tl.bfloat16), kv, acc)"
FINITE_MAX = [
    ('m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)', 'm_i = tl.full([BLOCK_H], -1e30, tl.float32)'),
    ('alpha = tl.where(m_new == float("-inf"), 0.0, tl.exp(m_i - m_new))', "alpha = tl.exp(m_i - m_new)"),
    ('p = tl.where(m_new[:, None] == float("-inf"), 0.0, tl.exp(s - m_new[:, None]))', "p = tl.exp(s - m_new[:, None])"),
]
# Knob variants set module constants (`NAME = value` at the start of a line), whatever they are now.
KNOBS: dict[str, dict[str, int]] = {
    "bn32s3": dict(BLOCK_N=32, NUM_STAGES=3),
    "finitemax_bn32s3": dict(BLOCK_N=32, NUM_STAGES=3),
    "bn64s2": dict(BLOCK_N=64, NUM_STAGES=2),
    "bn64s3": dict(BLOCK_N=64, NUM_STAGES=3),
    "bn128s1": dict(BLOCK_N=128, NUM_STAGES=1),
    "s1": dict(NUM_STAGES=1),
    "w4": dict(NUM_WARPS=4),
    "w16": dict(NUM_WARPS=16),
    "bh32w4": dict(BLOCK_H=32, NUM_WARPS=4),
    "bh32w4s2": dict(BLOCK_H=32, NUM_WARPS=4, BLOCK_N=32, NUM_STAGES=2),
    "bh32w4bn64s1": dict(BLOCK_H=32, NUM_WARPS=4, BLOCK_N=64, NUM_STAGES=1),
    "bh32w8bn64s2": dict(BLOCK_H=32, NUM_WARPS=8, BLOCK_N=64, NUM_STAGES=2),
    "ws": dict(WARP_SPEC=1),
    "split2": dict(SPLITS=2),
    "waves2": dict(WAVES=2),
}
VARIANTS: dict[str, list[tuple[str, str]]] = {
    "base": [],
    "noqk": [(DOT_QK, "s = tl.zeros([q.shape[0], kv.shape[0]], tl.float32) + tl.sum(kv.to(tl.float32), axis=1)[None, :]")],
    "nopv": [(DOT_PV, "acc = acc + tl.sum(p, axis=1)[:, None] + tl.sum(kv.to(tl.float32), axis=0)[None, :]")],
    "nodots": [(DOT_QK, "s = tl.zeros([q.shape[0], kv.shape[0]], tl.float32) + tl.sum(kv.to(tl.float32), axis=1)[None, :]"),
               (DOT_PV, "acc = acc + tl.sum(p, axis=1)[:, None] + tl.sum(kv.to(tl.float32), axis=0)[None, :]")],
    "nogather": [("comp_base + tl.maximum(idx, 0).to(tl.int64) * sc_t", "comp_base + (t - W).to(tl.int64) * sc_t")],
    # no rescale of the accumulator when the running max moves (wrong maths; what the rescale costs)
    "norescale": [("    acc = acc * alpha[:, None]\n", "")],
    # a finite running max (-1e30, not -inf): no "row saw only -inf" selects on [BLOCK_H, BLOCK_N] a step
    "finitemax": FINITE_MAX,
    "finitemax_bn32s3": FINITE_MAX,
    **{k: [] for k in KNOBS},
    "hot": [],  # the base kernel on inputs whose indices all point into the first 64 entries
}


def load_variant(src: str, name: str, tmp: Path):
    text = src
    for knob, value in KNOBS.get(name, {}).items():
        text, n = re.subn(rf"^{knob} = \d+", f"{knob} = {value}", text, count=1, flags=re.M)
        if not n:
            raise SystemExit(f"knob variant {name}: no `{knob} = <int>` line in the kernel")
    for old, new in VARIANTS[name]:
        if old not in text:
            raise SystemExit(f"knock-out {name}: {old!r} is not in the kernel any more")
        text = text.replace(old, new)
    path = tmp / f"kv_{name}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"kv_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="dsv4_csa_decode")
    ap.add_argument("--shapes", default="flash 8k x128,pro 8k x128")
    ap.add_argument("--only", default=",".join(VARIANTS))
    ap.add_argument("--ncu", action="store_true")
    a = ap.parse_args(argv)
    task = load_task(a.task)
    ref = load_module(task.root / "reference.py", f"ko_ref_{a.task}")
    src = task.baseline_path.read_text()
    entry = task.entry
    shapes = [s for s in task.shapes if s.name in a.shapes.split(",")]
    names = [n for n in a.only.split(",") if n]
    l2_flush()
    flush_us = graph_us(None, flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        mods = {}
        for n in names:
            try:
                mods[n] = load_variant(src, n, Path(d))
            except SystemExit as e:
                print(e)
        for shape in shapes:
            inputs = ref.make_inputs(dict(shape.dims), torch.bfloat16, 1, "cuda")
            hot = list(inputs)
            idx = inputs[4]
            hot[4] = torch.where(idx >= 0, idx % 64, idx)  # every gather hits 64 rows: L2, not HBM
            for n, mod in mods.items():
                fn = getattr(mod, entry)
                args = hot if n == "hot" else inputs
                t0 = time.time()
                try:
                    us = graph_us(lambda: fn(*args), flush=True) - flush_us
                    ll = getattr(mod, "last_launch", {})
                    rows.append((shape.name, n, us, ll.get("splits"), ll.get("config"), compiled_stats(ll.get("compiled"))))
                    print(f"{shape.name:15s} {n:9s} {us:8.1f} us  splits {ll.get('splits')} {ll.get('config')} "
                          f"{compiled_stats(ll.get('compiled'))} ({time.time() - t0:.0f}s)", flush=True)
                except Exception as e:  # a knock-out that does not compile is a finding too
                    print(f"{shape.name:15s} {n:9s} ERROR {type(e).__name__}: {str(e)[:160]}", flush=True)
        base = {s: us for s, n, us, *_ in rows if n == "base"}
        print(f"\n## knock-outs of {a.task} (cold graph us a call; delta against base)")
        print("| shape | variant | us | vs base |")
        print("|---|---|---:|---:|")
        for s, n, us, *_ in rows:
            b = base.get(s)
            print(f"| {s} | {n} | {us:.1f} | {'' if b is None else f'{us - b:+.1f}'} |")
        if a.ncu and shapes and "base" in mods:
            inputs = ref.make_inputs(dict(shapes[0].dims), torch.bfloat16, 1, "cuda")
            fn = getattr(mods["base"], entry)
            for _ in range(3):
                fn(*inputs)
            torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

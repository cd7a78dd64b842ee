"""The DeepSeek V4 attention tasks side by side on a GPU (bench/dsv4.py is the command line).

For each task (dsv4_indexer_topk, dsv4_csa_decode, dsv4_hca_decode, dsv4_compress, and the FP8-cache
variant dsv4_csa_decode_fp8) and shape:
the reference in eager PyTorch, the reference under torch.compile (dynamic shapes: one compile per
task), the task's kernel.py, and the HBM roofline = bytes_moved(dims) / copy bandwidth measured
here (harness.profiling.measure). The table gives % of roofline for the kernel, its speedups over
eager and compiled, the kernel's launch split of the key axis (from kernel.py's `last_launch`), and
whether its output passes the task's check against the reference; a kept kernel (the tuner's best,
`load_best`) gets columns of its own, checked and timed on the same inputs.

Timing: do_bench (harness.profiling.measure.do_bench_us), median of repeated runs timed with CUDA
events; before every run do_bench zeroes a 256 MB buffer, flushing the 60 MB L2, so each run reads
its inputs from HBM. smoke() is the same code path on the CPU in the Triton interpreter, wall clock.
"""
from __future__ import annotations

import itertools
import math
import time

import torch

from harness.authoring.tasks import BUILTIN_KERNELS, compare, load_module, load_task
from harness.profiling.measure import copy_bandwidth_Bps, do_bench_us

TASKS = ["dsv4_indexer_topk", "dsv4_csa_decode", "dsv4_hca_decode", "dsv4_compress", "dsv4_csa_decode_fp8"]
QUICK = {"flash 8k x128", "flash 1M x4", "pro 1M x4", "csa kv d512 x4", "hca d512 x128"}


def load_best(specs: list[str]) -> dict:
    """--kernel TASK=FILE, repeated: {task: (file, entry function)}; ValueError names what is wrong (the
    decode step's reader of the same option, over this table's tasks: every DSV4 entry is named as its task)."""
    step = load_module(BUILTIN_KERNELS / "dsv4_decode_step" / "e2e.py", "bench_dsv4_step")
    fns = step.load_winners(specs, TASKS)
    return {name: (path, fns[name]) for name, _, path in (s.partition("=") for s in specs)}


def measure(name, task, ref, kmod, kfn, compiled, shape, bw, rep_ms, device="cuda", timer=None, best=None) -> dict:
    timer = timer or do_bench_us
    inputs = ref.make_inputs(shape.dims, torch.bfloat16, 0, device)
    expected = ref.reference(*inputs)
    out = kfn(*inputs)
    err = compare(task, ref, out, expected, inputs, "bfloat16")
    launch = getattr(kmod, "last_launch", {})
    row = dict(task=name, shape=shape.name, dims=shape.dims, mib=ref.bytes_moved(shape.dims, torch.bfloat16) / 2**20,
               ok=err is None, error=err, splits=launch.get("splits"), grid=str(launch.get("grid")))
    row["roof_us"] = ref.bytes_moved(shape.dims, torch.bfloat16) / bw * 1e6
    row["eager_us"] = timer(lambda: ref.reference(*inputs), rep_ms)
    row["kernel_us"] = timer(lambda: kfn(*inputs), rep_ms)
    row["compile_us"] = None
    if compiled is not None:
        try:
            compiled(*inputs)
            row["compile_us"] = timer(lambda: compiled(*inputs), rep_ms)
        except Exception as e:  # report, don't die: the other columns still stand
            row["compile_error"] = f"{type(e).__name__}: {str(e)[:120]}"
    row["pct_roof"] = 100 * row["roof_us"] / row["kernel_us"]
    if best is not None:
        # Checked like kernel.py: a "best" that is wrong, or fails, on a shape gets no figure there
        # (and kernel.py's figures of that shape stand).
        row.update(best_file=best[0], best_us=None, best_pct_roof=None)
        try:
            berr = compare(task, ref, best[1](*inputs), expected, inputs, "bfloat16")
            if berr is None:
                row["best_us"] = timer(lambda: best[1](*inputs), rep_ms)
                row["best_pct_roof"] = 100 * row["roof_us"] / row["best_us"]
        except Exception as e:  # noqa: BLE001 - a cell of the table, not the end of it
            berr = f"{type(e).__name__}: {str(e)[:200]}"
        row.update(best_ok=berr is None, best_error=berr)
    return row


def run(names, best: dict, rep_ms: int, quick: bool = False, compile: bool = True) -> tuple[list[dict], int, float]:
    """Every shape of each task (QUICK's only with `quick`) on the GPU, a line each as it is measured:
    (rows, shapes lost to an error, the copy bandwidth in bytes a second)."""
    torch._dynamo.config.cache_size_limit = 64
    bw = copy_bandwidth_Bps()
    print(f"# {torch.cuda.get_device_name()}  torch {torch.__version__}  copy bandwidth {bw / 1e12:.2f} TB/s", flush=True)
    rows, dropped = [], 0
    for name in names:
        task = load_task(name, check_null=False)
        ref = task.load_reference()
        kmod = load_module(task.baseline_path, f"bench_kernel_{name}")
        kfn = getattr(kmod, task.entry)
        compiled = torch.compile(ref.reference, dynamic=True) if compile else None
        for shape in task.shapes:
            if quick and shape.name not in QUICK:
                continue
            t0 = time.time()
            try:
                row = measure(name, task, ref, kmod, kfn, compiled, shape, bw, rep_ms, best=best.get(name))
            except Exception as e:  # one broken shape must not cost the rest of a GPU session
                print(f"{name:18s} {shape.name:18s} ERROR {type(e).__name__}: {str(e)[:300]}", flush=True)
                torch.cuda.empty_cache()
                dropped += 1
                continue
            row["wall_s"] = time.time() - t0
            rows.append(row)
            c = f"{row['compile_us']:9.1f}" if row["compile_us"] else "        -"
            print(f"{name:18s} {shape.name:18s} {row['mib']:8.1f} MiB roof {row['roof_us']:8.1f} | eager {row['eager_us']:9.1f}"
                  f" compile {c} kernel {row['kernel_us']:9.1f} us | {row['pct_roof']:5.1f}% roof | splits {row['splits']}"
                  f" | {'ok' if row['ok'] else 'FAIL: ' + str(row['error'])[:60]} ({row['wall_s']:.0f}s)", flush=True)
            torch.cuda.empty_cache()
    return rows, dropped, bw


def exit_status(rows: list[dict], dropped: int = 0) -> int:
    """0 when every shape was measured and every checked kernel (kernel.py, a kept one) is correct, else 1."""
    return 0 if not dropped and all(r["ok"] and r.get("best_ok", True) for r in rows) else 1


# Knob grids for sweep() (module-level constants of each kernel.py, read at call time).
SWEEP = {
    "dsv4_indexer_topk": dict(shapes=["flash 8k x128", "flash 1M x4"], knobs=dict(BLOCK_N=[64, 128], SELECT_BLOCK=[1024, 4096])),
    "dsv4_csa_decode": dict(shapes=["pro 8k x128", "flash 1M x4"], knobs=dict(BLOCK_N=[16, 32, 64], NUM_WARPS=[4, 8])),
    "dsv4_hca_decode": dict(shapes=["pro 8k x128", "flash 1M x4"], knobs=dict(BLOCK_N=[16, 32, 64], NUM_WARPS=[4, 8])),
    "dsv4_compress": dict(shapes=["csa kv d512 x128", "hca d512 x128"], knobs=dict(NUM_WARPS=[1, 2, 4, 8])),
}


def sweep(names, rep_ms) -> int:
    """Time kernel.py over SWEEP's knob grid (a quick stand-in for the offline tuner on a GPU)."""
    for name in [n for n in names if n in SWEEP]:
        task = load_task(name, check_null=False)
        ref = task.load_reference()
        kmod = load_module(task.baseline_path, f"sweep_kernel_{name}")
        kfn = getattr(kmod, task.entry)
        grid = SWEEP[name]["knobs"]
        base = {k: getattr(kmod, k) for k in grid}
        for shape in [s for s in task.shapes if s.name in SWEEP[name]["shapes"]]:
            inputs = ref.make_inputs(shape.dims, torch.bfloat16, 0, "cuda")
            expected = ref.reference(*inputs)
            results = []
            for values in itertools.product(*grid.values()):
                cfg = dict(zip(grid, values))
                for k, v in cfg.items():
                    setattr(kmod, k, v)
                try:
                    err = compare(task, ref, kfn(*inputs), expected, inputs, "bfloat16")
                    us = do_bench_us(lambda: kfn(*inputs), rep_ms)
                except Exception as e:
                    err, us = f"{type(e).__name__}: {str(e)[:80]}", float("inf")
                results.append((us, cfg, err))
            for k, v in base.items():
                setattr(kmod, k, v)
            base_us = next(us for us, cfg, _ in results if cfg == base)
            best = min((r for r in results if r[2] is None), key=lambda r: r[0])
            print(f"sweep {name:18s} {shape.name:16s} committed {base} {base_us:8.1f} us | best {best[1]} "
                  f"{best[0]:8.1f} us ({base_us / best[0]:.2f}x) | " +
                  " ".join(f"{'/'.join(map(str, c.values()))}:{u:.0f}{'' if e is None else '!'}" for u, c, e in results),
                  flush=True)
            del inputs, expected
            torch.cuda.empty_cache()
    return 0


def smoke(names, best: dict) -> int:
    """run()'s code path on CPU in the interpreter (each task's first interpreter shape, wall clock),
    then the table: for tests only; the times it prints are not kernel speeds."""
    def wall(fn, _rep):
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    rows = []
    for name in names:
        task = load_task(name, check_null=False)
        ref = task.load_reference()
        kmod = load_module(task.baseline_path, f"bench_kernel_{name}")
        for shape in task.interpreter_shapes[:1]:
            rows.append(measure(name, task, ref, kmod, getattr(kmod, task.entry), None, shape, 1e12, 0, "cpu", wall,
                                best=best.get(name)))
    print_table(rows, 1e12, "CPU interpreter (smoke test; times are not kernel speeds)")
    return exit_status(rows)


def print_table(rows, bw, device=None) -> None:
    device = device or torch.cuda.get_device_name()
    print(f"\n## DeepSeek V4 attention tasks on {device} (copy bw {bw / 1e12:.2f} TB/s; "
          f"times in us, median, L2 flushed; do_bench)")
    with_best = any("best_ok" in r for r in rows)
    print("| task | shape | MiB | roofline | eager | compiled | kernel | kernel % roof | x eager | x compiled | KV splits | check |"
          + (" best | best % roof | best x kernel |" if with_best else ""))
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|" + ("---:|---:|---:|" if with_best else ""))
    for r in rows:
        comp = r["compile_us"]
        cols = [r["task"].removeprefix("dsv4_"), r["shape"], f"{r['mib']:.1f}", f"{r['roof_us']:.1f}",
                f"{r['eager_us']:.1f}", f"{comp:.1f}" if comp else "-", f"{r['kernel_us']:.1f}",
                f"{r['pct_roof']:.0f}%", f"{r['eager_us'] / r['kernel_us']:.2f}",
                f"{comp / r['kernel_us']:.2f}" if comp else "-", str(r["splits"]), "ok" if r["ok"] else "FAIL"]
        if with_best:
            b = r.get("best_us")
            cols += ([f"{b:.1f}", f"{r['best_pct_roof']:.0f}%", f"{r['kernel_us'] / b:.2f}"] if b else
                     ["FAIL" if r.get("best_ok") is False else "-", "-", "-"])
        print("| " + " | ".join(cols) + " |")
    geo = [r["eager_us"] / r["kernel_us"] for r in rows]
    if geo:
        print(f"\ngeomean kernel speedup over eager: {math.exp(sum(map(math.log, geo)) / len(geo)):.2f}x over {len(geo)} shapes")

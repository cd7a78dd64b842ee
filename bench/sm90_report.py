"""What the compiler makes of a task's kernel on an H100/H200 (sm_90a), on a machine WITHOUT a GPU.

Runs the task's entry once on its first interpreter shape (CPU tensors) with every Triton kernel
of kernel.py intercepted: each launch's arguments and constexprs are recorded instead of run.
Each recorded launch is then compiled for sm_90a (triton.compile with a GPUTarget: no driver
needed) with the pointer/integer divisibility hints the launcher would give it, and assembled by
Triton's bundled ptxas with -v. Printed per kernel: registers a thread, spill bytes, shared
memory, wgmma / mma.sync / cp.async instruction counts (in the PTX), compile seconds.

    PYTHONPATH=. python bench/sm90_report.py dsv4_csa_decode [--set BF16_DOT=1 --set SPLITS=1 ...]
    PYTHONPATH=. python bench/sm90_report.py softmax --file variants/split.py --dims rows=2,cols=131072 \
        --set CHUNKS=8 --set CHUNKS_P2=8 --set BLOCK=16384      # a variant, on a shape of your choice

--set NAME=INT sets a module-level knob of kernel.py before the call, or (if it names a constexpr
of an intercepted kernel) overrides that constexpr at compile time: e.g. BF16_DOT=1, which the
DSV4 wrappers set only for CUDA inputs. Why: register spills, a dot that did not become wgmma, or a
load that did not become cp.async explain a slow Triton kernel, and ptxas says so without a GPU.
SM90_DUMP=/tmp/x writes each kernel's PTX to /tmp/x_<kernel>.ptx (which loads became what).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.authoring.tasks import load_module, load_task  # noqa: E402

_DTYPES = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32", torch.int32: "i32",
           torch.int64: "i64", torch.uint8: "u8", torch.int8: "i8"}


class _Recorder:
    """Stands in for a JITFunction: `k[grid](*args, **meta)` records, `.warmup` refuses (the
    wrappers then take their CPU path)."""

    def __init__(self, fn, calls):
        self.fn, self.calls = fn, calls

    def __getitem__(self, grid):
        return lambda *args, **meta: self.calls.append((self.fn, args, meta))

    def warmup(self, *a, **k):
        raise RuntimeError("sm90_report records launches only")


def _signature(fn, args, meta):
    sig, consts, attrs = {}, {}, {}
    for i, (name, p) in enumerate(zip(fn.arg_names, fn.params)):
        a = args[i] if i < len(args) else meta.get(name, p.default)
        if p.is_constexpr:
            consts[name], sig[name] = a, "constexpr"
            continue
        if isinstance(a, torch.Tensor):
            sig[name] = "*" + _DTYPES[a.dtype]
        elif isinstance(a, float):
            sig[name] = "fp32"
        else:
            sig[name] = "i32" if abs(int(a)) < 2 ** 31 else "i64"
        # As the launcher specialises: pointers (torch allocations are 16-byte aligned) and
        # integers divisible by 16 carry tt.divisibility 16.
        if isinstance(a, torch.Tensor) or (isinstance(a, int) and a % 16 == 0):
            attrs[(i,)] = [["tt.divisibility", 16]]
    return sig, consts, attrs


def _ptxas():
    import triton

    bindir = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
    # The bundled ptxas may be older than the PTX Triton emits; the Blackwell one reads newer PTX.
    for name in ("ptxas-blackwell", "ptxas"):
        if (bindir / name).exists():
            return str(bindir / name)
    return "ptxas"


def report(fn, args, meta, overrides) -> dict:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    meta = dict(meta)
    meta.update({k: v for k, v in overrides.items() if k in fn.arg_names})
    sig, consts, attrs = _signature(fn, args, meta)
    opts = {k: meta[k] for k in ("num_warps", "num_stages") if k in meta}
    t0 = time.time()
    k = triton.compile(ASTSource(fn, sig, consts, attrs), target=GPUTarget("cuda", 90, 32), options=opts)
    ptx = k.asm["ptx"]
    if os.environ.get("SM90_DUMP"):
        Path(f"{os.environ['SM90_DUMP']}_{fn.__name__}.ptx").write_text(ptx)
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        Path(src).write_text(ptx)
        out = subprocess.run([_ptxas(), "-v", "--gpu-name", "sm_90a", src, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True)
    regs = spills = None
    for line in out.stderr.splitlines():
        if "Used" in line and "registers" in line:
            regs = int(line.split("Used")[1].split("registers")[0])
        if "spill stores" in line:
            spills = int(line.split("bytes spill stores")[0].split(",")[-1])
    return dict(kernel=fn.__name__, regs=regs, spill_bytes=spills, shared=k.metadata.shared,
                wgmma=ptx.count("wgmma.mma_async"), mma_sync=ptx.count("mma.sync"), cp_async=ptx.count("cp.async."),
                secs=round(time.time() - t0, 1), ptxas_error=None if out.returncode == 0 else out.stderr.strip()[-200:])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="sm_90a registers/spills/wgmma of a task's Triton kernels, no GPU needed")
    ap.add_argument("task")
    ap.add_argument("--set", action="append", default=[], metavar="NAME=INT")
    ap.add_argument("--file", default=None, help="a file of the task's folder instead of kernel.py (variants/split.py)")
    ap.add_argument("--dims", default=None, metavar="K=V,...", help="the shape run (default: the first interpreter shape)")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":  # @triton.jit then makes interpreter functions, not compilable
        print("bench/sm90_report.py: unset TRITON_INTERPRET (it compiles for sm_90a, it does not interpret)", file=sys.stderr)
        return 2
    try:
        overrides = {k: int(v) for k, v in (s.split("=", 1) for s in args.set)}
        task = load_task(args.task, check_null=False)
        path = task.root / args.file if args.file else task.baseline_path
        if not path.is_file():
            raise ValueError(f"{path}: no such file")
        dims = {k: int(v) for k, v in (d.split("=", 1) for d in args.dims.split(","))} if args.dims \
            else task.interpreter_shapes[0].dims
    except Exception as e:
        print(f"bench/sm90_report.py: {e}", file=sys.stderr)
        return 2
    import triton

    ref = task.load_reference()
    kmod = load_module(path, f"sm90_{task.name}")
    for name, value in overrides.items():
        if hasattr(kmod, name) and not isinstance(getattr(kmod, name), triton.runtime.jit.JITFunction):
            setattr(kmod, name, value)
    calls = []
    jitted = {n: getattr(kmod, n) for n in dir(kmod) if isinstance(getattr(kmod, n), triton.runtime.jit.JITFunction)}
    for name, fn in jitted.items():
        setattr(kmod, name, _Recorder(fn, calls))
    inputs = ref.make_inputs(dims, torch.bfloat16, 0, "cpu")
    try:
        getattr(kmod, task.entry)(*inputs)
    finally:  # the kernels call their @triton.jit helpers by global name: put them back to compile
        for name, fn in jitted.items():
            setattr(kmod, name, fn)
    print(f"# {task.name} {path.name} on sm_90a ({dims}; set {overrides or '-'})")
    print("| kernel | regs | spill B | shared B | wgmma | mma.sync | cp.async | compile s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for fn, a, meta in calls:
        r = report(fn, a, meta, overrides)
        print(f"| {r['kernel']} | {r['regs']} | {r['spill_bytes']} | {r['shared']} | {r['wgmma']} | {r['mma_sync']} | "
              f"{r['cp_async']} | {r['secs']} |" + (f" ptxas: {r['ptxas_error']}" if r["ptxas_error"] else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

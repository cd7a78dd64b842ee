"""CuTe DSL tasks (issue 23) on a machine without a GPU: what can be said and checked here.

- a CuTe DSL task without nvidia-cutlass-dsl, or without a GPU, gets one line naming the fix, exit 2
  (`warpsmith eval`, `warpsmith run`); the library entry point rejects it as `dsl-unavailable`;
- the launch counter of a CuTe child counts compiled programs and skips them in ghost mode (a real
  kernel compiled for sm_90a by the real DSL, which compiles without a GPU; needs the package);
- the child's scratch folder holds CuTe DSL's compile cache.
The GPU side (the baseline's bandwidth, candidates accepted and rejected for real) is
`bash bench/h200.sh cute`.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.authoring.dsl_support import CUTE_INSTALL, cute_installed, dsl_problem
from harness.authoring.tasks import load_task

REPO = Path(__file__).resolve().parents[2]
TASK = REPO / "kernels" / "rmsnorm_cute"
BASELINE = TASK / "kernel.py"
needs_cute = pytest.mark.skipif(not cute_installed(), reason="nvidia-cutlass-dsl is not installed")
without_cute = pytest.mark.skipif(cute_installed(), reason="nvidia-cutlass-dsl is installed here")


def _warpsmith(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]), **(env or {}))
    return subprocess.run([sys.executable, "-m", "warpsmith", *args], capture_output=True, text=True, env=e,
                          timeout=300, cwd=REPO)


def test_the_task_is_a_cute_task_with_the_triton_tasks_shapes():
    task, triton = load_task(TASK), load_task(REPO / "kernels" / "rmsnorm")
    assert task.dsl == "cute" and "dsl-cute" in task.enforced_rules_packs
    assert [s.dims for s in task.shapes] == [s.dims for s in triton.shapes]
    assert (TASK / "reference.py").read_text().split("\n", 1)[1] == \
        (REPO / "kernels" / "rmsnorm" / "reference.py").read_text().split("\n", 1)[1]


@without_cute
def test_eval_without_the_package_says_how_to_install_it():
    r = _warpsmith("eval", "rmsnorm_cute", str(BASELINE), "--json")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout == ""  # bad input is never a verdict, --json or not
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0].startswith("warpsmith eval: rmsnorm_cute is a CuTe DSL task") and CUTE_INSTALL in lines[0]


@without_cute
def test_run_without_the_package_says_how_to_install_it_and_leaves_no_session(tmp_path):
    e = dict(os.environ, PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "warpsmith", "run", "rmsnorm_cute", "--headless", "--iterations", "1"],
                       capture_output=True, text=True, env=e, timeout=300, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [f"warpsmith: {dsl_problem(load_task(TASK), True)}"]
    assert not (tmp_path / ".warpsmith").exists()


def test_a_cute_task_needs_a_gpu_and_the_static_checks_run_anyway():
    task = load_task(TASK)
    problem = dsl_problem(task, on_gpu=False)
    assert problem is not None and "\n" not in problem
    if cute_installed():
        assert "only on an NVIDIA GPU" in problem and "warpsmith check rmsnorm_cute" in problem
    assert dsl_problem(load_task(REPO / "kernels" / "rmsnorm"), on_gpu=False) is None
    r = _warpsmith("check", "rmsnorm_cute", str(BASELINE))
    assert r.returncode == 0, r.stdout + r.stderr


def test_evaluate_rejects_a_cute_task_it_cannot_run_after_the_static_stage():
    from harness.evaluate import EvalOptions, evaluate

    v = evaluate(load_task(TASK), BASELINE, options=EvalOptions(on_gpu=False))
    assert not v["accepted"] and v["stage"] == "import"
    assert [r["rule"] for r in v["reasons"]] == ["dsl-unavailable"]
    assert v["violations"] == []  # the static stage ran (and passed) first
    assert not v["recommendation"]["can_keep"]


def test_the_childs_scratch_folder_holds_the_cute_compile_cache():
    from harness.evaluate import EvalOptions
    from harness.evaluate.runner import ChildProcess, scrubbed_env

    assert scrubbed_env({"CUTE_DSL_ARCH": "sm_90a", "PATH": "/usr/bin"})["CUTE_DSL_ARCH"] == "sm_90a"
    child = ChildProcess(None, on_gpu=False, opts=EvalOptions(on_gpu=False))
    try:
        env = open(f"/proc/{child.proc.pid}/environ", "rb").read().split(b"\0")
        cache = [e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"CUTE_DSL_CACHE_DIR=")]
        if not cache:  # under the sandbox the pid is bwrap's: its child carries the environment
            from harness.evaluate.sandbox import descendants

            for pid in descendants(child.proc.pid):
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
                cache += [e.split(b"=", 1)[1].decode() for e in env if e.startswith(b"CUTE_DSL_CACHE_DIR=")]
        assert cache and Path(cache[0]) == child.scratch / "cute" and Path(cache[0]).is_dir()
    finally:
        child.close()


COUNTER_SCRIPT = textwrap.dedent('''
    import torch, cutlass, cutlass.cute as cute
    import cuda.bindings.driver as cuda
    from cutlass.cute.runtime import from_dlpack
    from harness.evaluate.guards import launch_counter

    counter = launch_counter("cute")

    @cute.kernel
    def copy_kernel(gX: cute.Tensor, gY: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        gY[bidx, tidx] = gX[bidx, tidx]

    @cute.jit
    def host(mX: cute.Tensor, mY: cute.Tensor, stream):
        copy_kernel(mX, mY).launch(grid=(mX.shape[0], 1, 1), block=(mX.shape[1], 1, 1), stream=stream)

    x = torch.randn(4, 32, dtype=torch.bfloat16)
    y = torch.zeros_like(x)
    mx, my = from_dlpack(x), from_dlpack(y)
    fn = cute.compile(host, mx, my, cuda.CUstream(0))
    assert counter.launches == 0, "compiling is not launching"
    counter.ghost = True
    fn(mx, my, cuda.CUstream(0))
    fn(mx, my, cuda.CUstream(0))
    print("ghost", counter.launches, sorted(counter.kernels), bool((y == 0).all()))
    counter.ghost = False
    try:
        fn(mx, my, cuda.CUstream(0))   # no GPU here: the real run fails
    except Exception as e:
        print("real", counter.launches, type(e).__name__)
''')


@needs_cute
def test_the_cute_launch_counter_counts_compiled_programs_and_ghosts_them(tmp_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               CUTE_DSL_ARCH="sm_90a", CUTE_DSL_CACHE_DIR=str(tmp_path / "cute"), CUDA_VISIBLE_DEVICES="")
    (tmp_path / "counter.py").write_text(COUNTER_SCRIPT)  # (the DSL reads a kernel's source from its file)
    r = subprocess.run([sys.executable, "counter.py"], capture_output=True, text=True, env=env,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.strip().splitlines()
    # counted (named after the @cute.jit function, mangled), and the output left as it was
    assert lines[0].startswith("ghost 2 ['cute:cutlass_host_") and lines[0].endswith(" True"), lines
    # A real run loads the module onto the GPU before it launches: without one it fails first.
    assert lines[1] == "real 2 DSLCudaRuntimeError", lines


WATCH_SCRIPT = textwrap.dedent('''
    import sys, torch
    import cuda.bindings.driver as cuda
    from cutlass.cute.runtime import from_dlpack
    from harness.evaluate import guards
    from harness.authoring.tasks import load_module

    counter = guards.launch_counter("cute")
    watch = guards.IntrospectionWatch()
    watch.install()
    path = sys.argv[1]
    watch.watch_file(path)
    mod = load_module(__import__("pathlib").Path(path), "candidate")
    x = torch.randn(8, 1000, dtype=torch.bfloat16)
    w = torch.rand(1000, dtype=torch.bfloat16)
    y = torch.empty_like(x)
    tw = guards.TorchComputeWatch()
    with tw:   # what the child watches during a correctness call: compiling, DLPack hand-over
        mx = from_dlpack(x).mark_layout_dynamic(leading_dim=1)
        mw = from_dlpack(w).mark_layout_dynamic(leading_dim=0)
        my = from_dlpack(y).mark_layout_dynamic(leading_dim=1)
        fn = mod.cute.compile(mod._rms_host, mx, mw, my, 1e-6, cuda.CUstream(0))
    print("introspection", watch.take())
    print("torch", tw.findings(), tw.to_python)
''')


@needs_cute
def test_compiling_a_cute_candidate_under_the_childs_watches_is_not_a_violation(tmp_path):
    """The DSL reads the candidate's source, rewrites and traces it, and takes tensors through DLPack:
    none of that may count as the candidate introspecting or reading values into Python."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               CUTE_DSL_ARCH="sm_90a", CUTE_DSL_CACHE_DIR=str(tmp_path / "cute"), CUDA_VISIBLE_DEVICES="")
    (tmp_path / "watch.py").write_text(WATCH_SCRIPT)
    honest = REPO / "tests" / "redteam" / "candidates" / "cute_honest_dynamic.py"
    r = subprocess.run([sys.executable, "watch.py", str(honest)], capture_output=True, text=True, env=env,
                       timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().splitlines() == ["introspection []", "torch [] 0"]


@needs_cute
def test_a_cute_child_imports_the_dsl_and_a_candidate_inside_the_sandbox():
    """The child of a CuTe task (sandboxed where bwrap works: read-only files, /tmp and homes hidden)
    imports cutlass before any candidate code and installs the CuTe launch counter; importing a
    candidate replaces nothing the harness relies on."""
    from harness.evaluate import EvalOptions
    from harness.evaluate.runner import ChildProcess

    child = ChildProcess(load_task(TASK), on_gpu=False, opts=EvalOptions(on_gpu=False))
    try:
        hello = child.start(300)
        assert hello.get("ok"), hello
        assert "import_cutlass" in hello["startup_s"]
        for f in (BASELINE, REPO / "tests" / "redteam" / "candidates" / "cute_honest_dynamic.py"):
            r, _ = child.request({"op": "import", "role": "candidate", "path": str(child.stage(f))}, 300)
            assert r["ok"] and r["patched"] == [] and r["observed"] == [], (f.name, r)
    finally:
        child.close()


@needs_cute
def test_every_launch_plan_of_the_baseline_compiles_for_sm90a(tmp_path):
    """bench/cute_variants.py --dry-run: the plans it times on the H200 and the host's plan for held-out
    widths (odd, prime, 1 .. 262144; 128k and wider rows go over a cluster of CTAs) all compile."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               CUTE_DSL_ARCH="sm_90a", CUTE_DSL_CACHE_DIR=str(tmp_path / "cute"), CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, str(REPO / "bench" / "cute_variants.py"), "--dry-run"], capture_output=True,
                       text=True, env=env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = r.stdout
    assert "cols=131072  vec=8 host" in out and "cluster=8 threads=256x1" in out
    assert "cols=262144  vec=1 host" in out and "cluster=8" in out
    assert "FAIL" not in out and out.strip().endswith("plans compiled")


@without_cute
def test_the_variants_bench_without_the_package_says_how_to_install_it():
    r = subprocess.run([sys.executable, str(REPO / "bench" / "cute_variants.py"), "--dry-run"], capture_output=True,
                       text=True, timeout=120, cwd=REPO)
    assert r.returncode == 2 and "warpsmith[cute]" in r.stderr and "Traceback" not in r.stderr

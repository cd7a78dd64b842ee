"""The tasks' variants stay correct across their declared spaces (Triton interpreter), and the
GPU sweep's machinery (harness/agents/variant_sweep.py, run by bench/variant_sweep.py) runs end to
end on the interpreter's shapes: launches recorded without running, configurations that launch the
same kernels checked once (compiled ahead by worker processes, which on the interpreter have nothing
to compile: the plumbing is what runs), every one of the sample correct against the reference."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.agents import variant_sweep as vs
from harness.agents.tunespace import ARCH, DEFAULT_SMEM_KIB, PER_SM, hardware_limits, read_space
from harness.authoring.packs import BUILTIN_PACKS
from harness.authoring.tasks import load_module, load_task

REPO = Path(__file__).resolve().parents[2]
LIMITS = {**ARCH, **PER_SM, "smem_per_block": DEFAULT_SMEM_KIB * 1024}


def _check(task, fn, dims):
    ref = task.load_reference()
    inputs = ref.make_inputs(dims, torch.bfloat16, 1, "cpu")
    tol = task.tolerance["bfloat16"]
    out = fn(*inputs)
    exp = ref.reference(*inputs)
    assert out.shape == exp.shape and out.dtype == exp.dtype
    assert torch.allclose(out.float(), exp.float(), atol=tol.atol, rtol=tol.rtol), dims


@pytest.mark.parametrize("task_name", ["softmax", "rmsnorm"])
def test_persistent_variant_at_its_corners_and_on_its_long_row_path(task_name, tmp_path):
    """Every knob at its smallest and largest declared value (one at a time), on rows that leave a
    tail in the last tile and programs that walk several tiles; then the two-pass path for rows
    longer than a row in registers, which the interpreter's shapes never reach."""
    task = load_task(task_name, check_null=False)
    space = read_space((task.root / "variants/persistent.py").read_text(), "variants/persistent.py")
    configs = [space.default()]
    for p in space.params:
        for v in (p.values[0], p.values[-1]):
            c = {**space.default(), p.name: v}
            if space.feasible(c, LIMITS) is None and c not in configs:
                configs.append(c)
    long_knobs = {"MAX_ONEPASS", "LONG_BLOCK", "LONG_WARPS", "LONG_STAGES"}
    for i, c in enumerate(configs):
        path = tmp_path / f"p{i}.py"
        path.write_text(space.render(c))
        mod = load_module(path, f"t_persistent_{task_name}_{i}")
        changed = {k for k in c if c[k] != configs[0][k]}
        if not changed or not changed <= long_knobs:  # tiles: a tail in the last one, programs walking several
            for dims in ({"rows": 37, "cols": 100}, {"rows": 5, "cols": 1500}):
                _check(task, getattr(mod, task.entry), dims)
        if not changed or changed <= long_knobs:  # the long-row knobs act on the two-pass path
            mod.MAX_ONEPASS = 1024
            _check(task, getattr(mod, task.entry), {"rows": 3, "cols": 2100})
    mod = load_module(tmp_path / "p0.py", f"t_persistent_long_{task_name}")
    mod.MAX_ONEPASS, mod.LONG_BLOCK = 1024, 256  # rows of 3001 take the two-pass path in 12 blocks
    for case in [None, *getattr(task.load_reference(), "HARD_CASES", {})]:  # -inf masks, huge values...
        _check(task, getattr(mod, task.entry), {"rows": 6, "cols": 3001, **({"case": case} if case else {})})


@pytest.mark.parametrize("task_name", ["softmax", "rmsnorm"])
def test_twopass_variant_pipelined_at_its_corners(task_name, tmp_path):
    task = load_task(task_name, check_null=False)
    space = read_space((task.root / "variants/twopass.py").read_text(), "variants/twopass.py")
    grid = space.grid(LIMITS)
    for i, c in enumerate([space.default(), grid[0], grid[-1]]):
        path = tmp_path / f"t{i}.py"
        path.write_text(space.render(c))
        fn = getattr(load_module(path, f"t_twopass_{task_name}_{i}"), task.entry)
        for case in [None, *getattr(task.load_reference(), "HARD_CASES", {})]:
            _check(task, fn, {"rows": 3, "cols": 5000, **({"case": case} if case else {})})


@pytest.mark.parametrize("task_name", ["softmax", "rmsnorm"])
def test_split_variant_on_its_whole_row_and_split_paths(task_name, tmp_path):
    """The one-pass path at its declared corners, then rows longer than MAX_ONEPASS on the split path:
    in the interpreter a row is one piece (its programs run one after another, so a wait for a later
    program could never end), which still runs the exchange of tagged partials and the combine, on rows
    of every length around the threshold, more rows than programs, and the hard inputs."""
    task = load_task(task_name, check_null=False)
    space = read_space((task.root / "variants/split.py").read_text(), "variants/split.py")
    grid = space.grid(LIMITS)
    assert space.feasible(space.default(), LIMITS) is None and len(grid) > 100
    for i, c in enumerate([space.default(), grid[0], grid[-1]]):
        path = tmp_path / f"s{i}.py"
        path.write_text(space.render(c))
        mod = load_module(path, f"t_split_{task_name}_{i}")
        for dims in ({"rows": 37, "cols": 100}, {"rows": 5, "cols": 1500}):
            _check(task, getattr(mod, task.entry), dims)
    mod.MAX_ONEPASS = 1024
    for prefetch in (1, 2):  # the next row's piece, or the next two rows', loading during the wait
        mod.PREFETCH = prefetch
        for cols in (1025, 2047, 3001):
            _check(task, getattr(mod, task.entry), {"rows": 5, "cols": cols})
    for case in getattr(task.load_reference(), "HARD_CASES", {}):  # -inf masks, huge values...
        _check(task, getattr(mod, task.entry), {"rows": 4, "cols": 3001, "case": case})
    # Every call left the exit counter at 0 and moved the base tag on past its own tags (3 programs:
    # 4 or 5 rows take 2 iterations a group, tags base + 1 and base + 2; the next call starts at base + 3).
    sync, _ = mod._SCRATCH[(-1, 0)]
    calls = 2 * 3 + len(getattr(task.load_reference(), "HARD_CASES", {}))
    assert sync.tolist() == [3 * calls, 0]


@pytest.mark.parametrize("task_name", ["softmax", "rmsnorm"])
def test_split_variant_wait_gives_up_with_nan_rows_not_a_hang(task_name):
    """A group whose programs are not all resident: in the interpreter the two programs of a row run
    one after another, so the first waits for a partial that never comes. With the wait bounded at 4
    polls it gives up and writes NaN (which fails every check) and goes on; the second program then
    finds the first's words: for row 0 already overwritten by row 2's (the first ran all its rows),
    so row 0 gives up too, rows 1 and 2 are right. Then the scratch is ready for the next call."""
    task = load_task(task_name, check_null=False)
    ref = task.load_reference()
    mod = load_module(task.root / "variants/split.py", f"t_split_wait_{task_name}")
    xs = ref.make_inputs({"rows": 3, "cols": 3000}, torch.bfloat16, 1, "cpu")
    exp = ref.reference(*xs)
    y = torch.empty_like(xs[0])
    sync = torch.zeros(2, dtype=torch.int32)
    if task_name == "softmax":
        part = torch.zeros((2, 2, 2), dtype=torch.int64)
        args = (xs[0], y, sync, part, 3, 3000, xs[0].stride(0), y.stride(0), 1, 4)
    else:
        part = torch.zeros((2, 2), dtype=torch.int64)
        args = (xs[0], xs[1], y, sync, part, 3, 3000, xs[0].stride(0), y.stride(0), mod.EPS, 1, 4)
    kernel = mod._softmax_split if task_name == "softmax" else mod._rmsnorm_split
    kernel[(2,)](*args, CHUNKS=2, CHUNKS_P2=2, BLOCK=2048, PREFETCH=1)
    assert y[:, :2048].isnan().all() and y[0, 2048:].isnan().all()
    tol = task.tolerance["bfloat16"]
    assert torch.allclose(y[1:, 2048:].float(), exp[1:, 2048:].float(), atol=tol.atol, rtol=tol.rtol)
    assert sync.tolist() == [4, 0]  # 3 iterations: the next call's tags start past them, counter reset
    _check(task, getattr(mod, task.entry), {"rows": 3, "cols": 20000})  # the wrapper, after a failed call


@pytest.mark.parametrize("task_name", ["softmax", "rmsnorm"])
def test_split_variant_never_proposes_a_launch_that_cannot_be_resident(task_name, tmp_path):
    """Every configuration the declared space allows, planned for an H200 (132 SMs, 2048 threads and
    64K registers an SM) on both long shapes: at most the programs the SMs can hold at once, their
    warps within an SM's, maxnreg within the register file they share, and the piece's estimated
    registers within maxnreg (no spill by the require's own estimate). PER_SM 2 and 4 are proposed."""
    task = load_task(task_name, check_null=False)
    space = read_space((task.root / "variants/split.py").read_text(), "variants/split.py")
    grid = space.grid(LIMITS)
    assert {c["PER_SM"] for c in grid} == {1, 2, 4}
    assert space.feasible({**space.default(), "PER_SM": 4, "LONG_WARPS": 32}, LIMITS)  # 128 warps: no SM holds them
    mod = load_module(task.root / "variants/split.py", f"t_split_plan_{task_name}")
    for c in grid:
        for k, v in c.items():
            setattr(mod, k, v)
        for rows, cols in ((2048, 32768), (512, 131072), (1024, 131072), (3, 140000)):
            chunks, groups, block, maxnreg = mod._plan(rows, cols, 132, 2048, 65536)
            per_sm = c["PER_SM"]
            assert chunks * groups <= 132 * per_sm, (c, rows, cols)
            assert per_sm * c["LONG_WARPS"] <= 64
            assert per_sm * c["LONG_WARPS"] * 32 * maxnreg <= 65536 and maxnreg <= 255
            assert block * chunks >= cols and block <= c["MAX_PIECE"]
        # The require's register estimate, against the register file these maxnreg registers make.
        assert space.feasible(c, {**LIMITS, "regs_per_sm": maxnreg * 32 * per_sm * c["LONG_WARPS"]}) is None, c


@pytest.mark.parametrize("task_name", ["softmax", "rmsnorm"])
def test_on_a_48_warp_sm_the_split_variant_plans_only_what_fits(task_name):
    """Ada and consumer Blackwell hold 48 warps an SM, not Hopper's 64: the hardware pack says so and
    the declared space follows it: configurations of more than 48 warps an SM leave the grid there."""
    space = read_space((REPO / "kernels" / task_name / "variants/split.py").read_text(), "variants/split.py")
    ada, _, which = hardware_limits([{"path": str(BUILTIN_PACKS / "hardware" / "rtx4090")}])
    hopper, _, _ = hardware_limits([{"path": str(BUILTIN_PACKS / "hardware" / "h200")}])
    assert which == "rtx4090" and ada["warps_per_sm"] == 48 and hopper["warps_per_sm"] == 64
    on_ada = space.grid(ada)
    assert on_ada and all(c["PER_SM"] * c["LONG_WARPS"] <= 48 for c in on_ada)
    on_hopper = space.grid(hopper)
    assert all(c in on_hopper for c in on_ada)
    # rmsnorm's pieces fit 64 warps an SM on Hopper (softmax's registers stop it at 32 on both)
    widest = {"softmax": 32, "rmsnorm": 64}[task_name]
    assert max(c["PER_SM"] * c["LONG_WARPS"] for c in on_hopper) == widest


def test_split_streams_check_needs_a_gpu_and_says_so_in_one_line():
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "split_streams.py")], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 2 and proc.stderr.startswith("bench/split_streams.py: no CUDA GPU")
    assert proc.stderr.count("\n") == 1


@pytest.mark.slow
def test_sweep_on_the_interpreter_checks_a_sample_of_every_variant(tmp_path):
    out = tmp_path / "sweep.json"
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "variant_sweep.py"), "softmax", "rmsnorm",
                           "--interpreter", "--limit", "3", "--workers", "2", "--json", str(out)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, "PYTHONPATH": str(REPO), "TRITON_INTERPRET": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("softmax", "rmsnorm"):
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(f"{name}: 15 configurations over 5 variants"))
        distinct = int(line.split(", ")[1].split()[0])
        assert distinct < 15 * 3, line  # configurations that launch the same kernels on a shape are checked once
        assert f"{name}: {distinct} distinct launch sets correct, 0 incorrect, 0 errors" in proc.stdout, proc.stdout
    report = json.loads(out.read_text())
    assert [r["task"] for r in report] == ["softmax", "rmsnorm"]
    assert all(r["correct"] > 0 and r["incorrect"] == 0 and r["errors"] == 0 for r in report)
    assert {v for r in report for s in r["shapes"] for v in s["per_variant"]} >= {
        "kernel.py", "variants/rows.py", "variants/twopass.py", "variants/persistent.py", "variants/split.py"}


def test_sweep_report_from_timed_results_names_the_best_the_buckets_liger_and_the_verdict(capsys):
    """The GPU half of the report, fed hand-written times (no GPU on CI): copy bandwidth 4000 GB/s,
    two variants, Liger failing on the long rows."""
    task = load_task("softmax", check_null=False)
    ref = task.load_reference()
    shapes = task.shapes
    confs = [{"variant": "variants/rows.py", "config": {"TILE": 4096}, "default": True, "space": 2},
             {"variant": "variants/rows.py", "config": {"TILE": 8192}, "default": False, "space": 2},
             {"variant": "variants/twopass.py", "config": {"BLOCK": 8192}, "default": True, "space": 1}]
    roof = [ref.bytes_moved(s.dims, torch.bfloat16) / 4000e9 * 1e6 for s in shapes]
    pct = {0: [0.7, 0.7, 0.7, 0.5], 1: [0.85, 0.82, 0.6, 0.4], 2: [0.5, 0.3, 0.81, 0.83]}
    results = {(si, ci): {"us": roof[si] / pct[ci][si], "correct": True, "error": None}
               for si in range(len(shapes)) for ci in pct}
    liger = {si: {"us": roof[si] / 0.72, "correct": True, "error": None} for si in range(3)}
    liger[3] = {"us": None, "correct": False, "error": "OutOfResources: shared memory"}
    clone_us = {si: roof[si] / 0.9 for si in range(len(shapes))}  # a clone of each shape's bytes: 90% of copy
    out = vs.report(task, ref, torch.bfloat16, shapes, confs, results, {}, liger, None, 4000.0, 12, 0, clone_us)
    text = capsys.readouterr().out
    assert [round(r["best_pct_of_clone"]) for r in out["shapes"]] == [94, 91, 90, 92]
    assert "copy us" in text and "%clone" in text
    assert "softmax VERDICT: best per shape >= 80% of copy bandwidth on 4/4 shapes" in text
    assert "at or faster than Liger on 3/3" in text and "long rows 128k FAILS" in text
    assert "bucket short: rows TILE=8192" in text and "bucket long: twopass BLOCK=8192" in text
    assert out["variants"]["variants/rows.py"]["best_overall"] in ({"TILE": 4096}, {"TILE": 8192})
    assert [round(r["best_pct"]) for r in out["shapes"]] == [85, 82, 81, 83]
    # --by TILE: rows' best per shape at each TILE beside the other (twopass has no TILE: not listed).
    out = vs.report(task, ref, torch.bfloat16, shapes, confs, results, {}, liger, None, 4000.0, 12, 0, clone_us,
                    by=["TILE"])
    assert {k: [round(p) for p in v] for k, v in out["by"]["TILE"]["variants/rows.py"].items()} == {
        4096: [70, 70, 70, 50], 8192: [85, 82, 60, 40]}
    assert list(out["by"]["TILE"]) == ["variants/rows.py"]
    assert "rows TILE=8192" in capsys.readouterr().out

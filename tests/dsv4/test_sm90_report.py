"""bench/sm90_report.py: the DSV4 decode kernel compiled for sm_90a on this GPU-less box keeps its
structure: both dots on wgmma, the gathered 1 KiB KV rows loaded as pipelined 16-byte cp.async
copies (a lost alignment fact once made them element-by-element loads: no cp.async at all).
Run as a subprocess: the test session interprets Triton (TRITON_INTERPRET=1), the tool compiles."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(*args, interpret="0"):
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRITON_INTERPRET=interpret)
    return subprocess.run([sys.executable, str(ROOT / "bench" / "sm90_report.py"), *args], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


def test_csa_decode_partial_compiles_to_wgmma_and_cp_async():
    p = run("dsv4_csa_decode", "--set", "BF16_DOT=1", "--set", "SPLITS=2")
    assert p.returncode == 0, p.stderr[-500:]
    rows = {r[0].strip(): r for r in (line.split("|")[1:-1] for line in p.stdout.splitlines()
                                      if line.startswith("| _csa"))}
    partial = rows["_csa_partial"]
    regs, wgmma, cp_async = int(partial[1]), int(partial[4]), int(partial[6])
    assert regs <= 255 and wgmma >= 2
    assert cp_async >= 20  # 16-byte copies of the KV tile, not only the index loads' few
    assert "_csa_combine" in rows


def test_refuses_bad_input_in_one_line():
    for args, interpret in ((["no_such_task"], "0"), (["dsv4_csa_decode"], "1")):
        p = run(*args, interpret=interpret)
        assert p.returncode == 2 and p.stderr.startswith("bench/sm90_report.py:") and p.stderr.count("\n") == 1


def test_a_variant_on_a_chosen_shape_split_rows_compile_without_spills():
    """softmax's and rmsnorm's variants/split.py on a 128k row as the H200 runs it (8 pieces of 16384
    at 16 warps; the CPU run makes one piece, so the constexprs are set): a piece fits registers."""
    for task in ("softmax", "rmsnorm"):
        p = run(task, "--file", "variants/split.py", "--dims", "rows=2,cols=131072", "--set", "CHUNKS=8",
                "--set", "CHUNKS_P2=8", "--set", "BLOCK=16384")
        assert p.returncode == 0, p.stderr[-500:]
        [row] = [line.split("|")[1:-1] for line in p.stdout.splitlines() if line.startswith(f"| _{task}_split")]
        assert int(row[1]) <= 128 and int(row[2]) == 0, row  # registers, spill bytes


def test_refuses_a_missing_variant_file_in_one_line():
    p = run("softmax", "--file", "variants/nope.py")
    assert p.returncode == 2 and p.stderr.startswith("bench/sm90_report.py:") and "nope.py" in p.stderr
    assert p.stderr.count("\n") == 1


def test_value_split_variants_default_fits_two_programs_an_sm():
    """kernels/dsv4_{csa,csa_fp8,hca}_decode/variants/vsplit.py at their defaults (issue 19): no spills,
    pipelined (cp.async) key chunks, and registers and shared memory that let two programs share an
    H200 SM (65536 registers, 228 KiB with 1 KiB reserved a block), as the defaults' comment says."""
    for task, kernel in (("dsv4_csa_decode", "_csa_vs_partial"), ("dsv4_csa_decode_fp8", "_csa_fp8_vs_partial"),
                         ("dsv4_hca_decode", "_hca_vs_partial")):
        p = run(task, "--file", "variants/vsplit.py", "--set", "BF16_DOT=1")
        assert p.returncode == 0, p.stderr[-500:]
        [row] = [line.split("|")[1:-1] for line in p.stdout.splitlines() if line.startswith(f"| {kernel} ")]
        regs, spills, shared, wgmma, cp_async = (int(row[i]) for i in (1, 2, 3, 4, 6))
        warps = 4  # NUM_WARPS's default
        assert spills == 0 and wgmma >= 2 and cp_async >= 20, row
        assert 2 * warps * 32 * -(-regs // 8) * 8 <= 65536 and 2 * (shared + 1024) <= 228 * 1024, row


def test_decode_baselines_defaults_fit_an_h200s_shared_memory():
    """Issue 19: the FP8 baseline once asked for 245888 bytes of shared memory on the H200 (232448 a block,
    the hardware pack's smem_per_block_kib = 227) and failed on every shape. Each decode baseline's
    defaults, compiled for sm_90a as the GPU runs them, fit: on an H200 the first configuration is taken
    (the wrapper compiles first and chooses smaller tiles on a smaller GPU)."""
    from harness.agents.tunespace import hardware_limits

    limits, _, _ = hardware_limits([{"id": "h200", "path": str(ROOT / "packs" / "hardware" / "h200")}])
    assert limits["smem_per_block"] == 227 * 1024
    for task, kernel in (("dsv4_csa_decode", "_csa_partial"), ("dsv4_csa_decode_fp8", "_csa_fp8_partial"),
                         ("dsv4_hca_decode", "_hca_partial")):
        p = run(task, "--set", "BF16_DOT=1")
        assert p.returncode == 0, p.stderr[-500:]
        [row] = [line.split("|")[1:-1] for line in p.stdout.splitlines() if line.startswith(f"| {kernel} ")]
        assert 0 < int(row[3]) <= limits["smem_per_block"], (task, row)

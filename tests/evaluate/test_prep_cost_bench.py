"""bench/prep_cost.py's CPU path (the plumbing the H200 run takes): every task of its table refilled
by the child's own _refill, before and after, each refilled set agreeing with make_inputs of its seed
and no two sets alike; the csa decodes refill only what a call reads."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "prep_cost.py"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(BENCH), "--cpu", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=600)


def test_the_table_covers_every_filled_task_and_each_refill_is_the_same_and_fresh():
    r = run("--reps", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {ln.split()[0]: ln.split() for ln in r.stdout.splitlines()[-6:]}
    assert set(rows) == {"softmax", "dsv4_csa_decode", "dsv4_csa_decode_fp8", "dsv4_hca_decode", "dsv4_indexer_topk",
                         "dsv4_compress"}
    for name, cols in rows.items():
        read_only = name.startswith("dsv4_csa")
        assert cols[-3:] == ["read" if read_only else "whole", "yes", "yes"], cols
        assert float(cols[-7]) > 0 and float(cols[-5]) > 0  # before, after ms a batch
        assert (cols[-6] != "-") == read_only  # and the whole refill's, where only what is read is refilled


def test_an_unknown_task_is_one_line_and_exit_2():
    r = run("--tasks", "dsv4_nope")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "dsv4_nope" in r.stderr

"""Issue 19's GPU judge (harness/model/dsv4_targets.py, bench/dsv4_targets.py its command line): its
verdict rules, its code path in the interpreter, and the script's refusal without a GPU.
The timing itself needs CUDA graphs on a GPU: the lead runs it there."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.model import dsv4_targets as targets

ROOT = Path(__file__).resolve().parents[2]

# The interpreter evaluates both sides of tl.where: exp(-inf - -inf) warns in numpy, is discarded.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def row(task, shape, roof, cold, graph, ok=True):
    return dict(task=task, shape=shape, roof_us=roof, cold_us=cold, graph_us=graph, ok=ok, error=None,
                eager_us=1.0, bench_us=1.0, pct_roof=100 * roof / cold, config={})


def test_judge_applies_the_issue_targets():
    rows = [row("dsv4_csa_decode", "flash 8k x128", 24.0, 55.0, 50.0),     # 44% of roof: pass
            row("dsv4_hca_decode", "pro 8k x128", 13.0, 40.0, 38.0),       # 33%: fail
            row("dsv4_csa_decode", "flash 1M x4", 0.7, 9.0, 14.0),         # launch-bound, 14 us: pass
            row("dsv4_hca_decode", "flash 1M x4", 0.7, 9.0, 16.0),         # launch-bound, 16 us: fail
            row("dsv4_csa_decode_fp8", "flash 8k x128", 23.0, 56.0, 50.0),  # 41%, within 2% of bf16: a tie, not faster
            row("dsv4_csa_decode_fp8", "flash 1M x4", 0.5, 9.5, 14.0),     # 5.5% slower than bf16: fail
            row("dsv4_indexer_topk", "flash 8k x128", 5.0, 50.0, 50.0, ok=False)]
    targets.judge(rows)
    assert [r["marks"] for r in rows] == [
        ["roof40 pass"], ["roof40 FAIL"], ["launch pass"], ["launch FAIL"],
        ["roof40 pass", "fp8 FAIL (tie)"], ["launch pass", "fp8 FAIL"], ["check FAIL"]]


def test_judge_at_the_best_split_count():
    """marks_best: the same targets with each row's best split time; fp8 against bf16's best."""
    rows = [row("dsv4_csa_decode", "flash 8k x128", 24.0, 90.0, 88.0),
            row("dsv4_csa_decode_fp8", "flash 8k x128", 23.0, 80.0, 78.0),
            row("dsv4_hca_decode", "flash 1M x4", 6.0, 30.0, 40.0)]
    rows[0]["best_split"] = dict(splits=2, us=50.0, metric="cold", points="")    # 48%: pass
    rows[1]["best_split"] = dict(splits=2, us=52.0, metric="cold", points="")    # slower than bf16's 50
    rows[2]["best_split"] = dict(splits=16, us=14.0, metric="graph", points="")  # launch-bound: graph
    targets.judge(rows)
    assert [r["marks"] for r in rows] == [["roof40 FAIL"], ["roof40 FAIL", "fp8 pass"], ["launch FAIL"]]
    assert [r["marks_best"] for r in rows] == [["roof40 pass"], ["roof40 pass", "fp8 FAIL"], ["launch pass"]]


def test_table_lists_every_failure(capsys):
    rows = [row("dsv4_csa_decode", "pro 8k x128", 43.6, 300.0, 290.0)]
    targets.judge(rows)
    targets.print_table(rows, 4.2e12, device="test")
    out = capsys.readouterr().out
    assert "| csa_decode | pro 8k x128 | 43.6 |" in out and "FAIL dsv4_csa_decode pro 8k x128: roof40 FAIL" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_refuses_without_gpu():
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "dsv4_targets.py")], capture_output=True, text=True,
                       timeout=120, cwd=ROOT)
    assert r.returncode == 2
    assert "needs a CUDA GPU" in r.stderr


def test_code_path_runs_in_the_interpreter(capsys):
    """Every stage (rows, verdicts, table, both sweeps) on the first interpreter shape of each task."""
    assert targets.smoke() in (0, 1)  # the CPU's wall-clock times may fail the targets
    out = capsys.readouterr().out
    for name in ("csa_decode", "hca_decode", "csa_decode_fp8", "indexer_topk"):
        assert f"| {name} |" in out
    assert "check FAIL" not in out and "ERROR" not in out
    assert out.count("prefers") == 4 and "sweep indexer_topk" in out
    # The split sweep ran on each decode task's shape and judged the targets at its best point.
    assert all(f"splits {name:16s}" in out for name in ("csa_decode", "hca_decode", "csa_decode_fp8"))
    assert "targets at each shape's best split count (3 rows swept)" in out


def test_variant_path_times_the_value_split_beside_each_baseline_in_the_interpreter(capsys):
    """--variant vsplit (section `vsplit` of bench/h200.sh): each task that ships variants/vsplit.py
    beside its baseline, both checked, the table, then the variant's points; tasks without it named."""
    tasks = ["dsv4_csa_decode", "dsv4_csa_decode_fp8", "dsv4_indexer_topk"]
    assert targets.smoke(tasks, variant="vsplit") == 0
    out = capsys.readouterr().out
    assert "| csa_decode | short, partial window |" in out and "| csa_decode_fp8 | short, partial window |" in out
    assert "dsv4_indexer_topk: no variants/vsplit.py, skipped" in out
    assert out.count("| ok |") == 2 and "FAIL" not in out and "ERROR" not in out
    assert "dsv4_csa_decode: vsplit" in out and "the baseline (geomean of 1 shapes)" in out
    [points] = [line for line in out.splitlines() if line.startswith("vsplit short, partial window prefers")]
    assert points.count("VSPLIT=") == 3 and " x " not in points and "!" not in points  # best + 2 points


def test_the_fp8_task_reads_fewer_bytes_than_bf16_on_every_shape_they_share():
    """Issue 19: "the FP8 variant reads fewer bytes than bf16": its roofline (bytes_moved) is below the
    bf16 task's on every shape of the same name, so being faster is a target it can reach."""
    from harness.authoring.tasks import load_task

    bf, fp = load_task("dsv4_csa_decode"), load_task("dsv4_csa_decode_fp8")
    bref, fref = bf.load_reference(), fp.load_reference()
    by_name = {s.name: s for s in bf.shapes}
    shared = [s for s in fp.shapes if s.name in by_name]
    assert len(shared) == len(fp.shapes) >= 4
    for s in shared:
        assert s.dims == by_name[s.name].dims
        assert fref.bytes_moved(s.dims, torch.bfloat16) < bref.bytes_moved(s.dims, torch.bfloat16), s.name

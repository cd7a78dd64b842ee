"""The evaluation trace (harness/evaluate/trace.py): a line per step, written as it ends, so an
evaluation killed mid-way still says where its time went (bench/eval_trace.py prints it)."""
from __future__ import annotations

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate, trace
from harness.authoring.tasks import load_task


def test_summary_groups_steps_by_phase_and_op_costliest_first():
    lines = [{"kind": "request", "phase": "timing", "op": "prep", "s": 2.0, "child_s": 1.5},
             {"kind": "request", "phase": "timing", "op": "prep", "s": 1.0, "child_s": 0.5},
             {"kind": "make", "phase": "correctness", "s": 0.5},
             {"kind": "request", "phase": "timing", "op": "batch", "s": 0.25, "child_s": 0.2}]
    rows = trace.summarise(lines)
    assert rows[0] == ("timing", "request", "prep", 2, 3.0, 2.0)
    assert [r[2] for r in rows] == ["prep", "", "batch"]


def test_a_cut_line_and_a_missing_file_read_as_what_was_written(tmp_path):
    assert trace.read(str(tmp_path / "none.jsonl")) == []
    p = tmp_path / "t.jsonl"
    p.write_text('{"kind": "make", "s": 1}\n{"kind": "requ')
    assert trace.read(str(p)) == [{"kind": "make", "s": 1}]


def test_an_evaluation_traces_each_child_request_and_the_parents_own_work(tmp_path, monkeypatch):
    path = tmp_path / "trace.jsonl"
    monkeypatch.setenv(trace.ENV, str(path))
    task = load_task("softmax")
    v = evaluate(task, Path(task.baseline_path), options=EvalOptions(
        on_gpu=False, static=False, heldout=False, shapes=["odd rows"], seed=1))
    assert v["accepted"], v["reasons"]
    lines = trace.read(str(path))
    ops = {(ln["phase"], ln.get("op")) for ln in lines if ln["kind"] == "request"}
    assert {("spawn", "setup"), ("import", "import"), ("correctness", "call")} <= ops
    calls = [ln for ln in lines if ln.get("op") == "call"]
    assert all(ln["child_s"] is not None and ln["s"] >= ln["child_s"] for ln in calls)
    assert any(ln["kind"] == "make" and ln["shape"] == "odd rows" for ln in lines)

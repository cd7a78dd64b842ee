"""The first version's contract: verdict keys, accept a correct candidate, reject a wrong one, CLI exits."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate
from harness.evaluate.verdict import cannot_keep_reason
from harness.authoring.tasks import load_task
from softmax_sources import WRONG

REPO = Path(__file__).resolve().parents[2]
KEYS = {"accepted", "stage", "reasons", "task", "candidate_sha256", "device", "timing_available", "shapes",
        "geomean_speedup", "noise_band_pct", "recommendation", "wall_s", "violations"}
SHAPE_KEYS = {"name", "dims", "long", "correct", "error", "candidate_us", "incumbent_us", "speedup",
              "roofline_pct", "candidate_graph_us", "incumbent_graph_us", "noise_pct"}


@pytest.fixture(scope="module")
def softmax_task():
    return load_task("softmax")


def test_baseline_is_accepted_with_full_verdict(softmax_task):
    v = evaluate(softmax_task, softmax_task.baseline_path, options=EvalOptions(on_gpu=False))
    assert KEYS <= set(v)
    json.dumps(v)  # JSON-serialisable
    assert v["accepted"] is True and v["stage"] == "done" and v["reasons"] == []
    assert v["device"] == "cpu (Triton interpreter)" and v["timing_available"] is False
    assert [s["name"] for s in v["shapes"]] == [s.name for s in softmax_task.interpreter_shapes]
    assert all(SHAPE_KEYS <= set(s) and s["correct"] for s in v["shapes"])
    assert any(s["long"] for s in v["shapes"])
    rec = v["recommendation"]
    assert rec["action"] == "revert" and rec["can_keep"] is True and "timing is unavailable" in rec["reason"]


def test_wrong_candidate_is_rejected_at_correctness(softmax_task, tmp_path):
    cand = tmp_path / "wrong.py"
    cand.write_text(WRONG)
    v = evaluate(softmax_task, cand, options=EvalOptions(on_gpu=False, shapes=["short rows"]))
    assert v["accepted"] is False and v["stage"] == "correctness"
    assert {r["rule"] for r in v["reasons"]} == {"incorrect"}
    assert v["shapes"][0]["correct"] is False and "elements off" in v["shapes"][0]["error"]
    assert v["recommendation"] == {"action": "revert", "can_keep": False, "reason": v["recommendation"]["reason"]}


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "warpsmith", "eval", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def test_cli_exit_codes(tmp_path, capsys):
    """Exit 0, 1 and 2 from real `python -m warpsmith eval` processes; the other two refusals (exit 2,
    before any evaluation) through the same command's main() here: a process start is ~2.5 s of CPU."""
    from warpsmith.cli import main

    ok = _cli("softmax", "kernels/softmax/kernel.py", "--json", "--shapes", "odd rows")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["accepted"] is True
    cand = tmp_path / "wrong.py"
    cand.write_text(WRONG)
    bad = _cli("softmax", str(cand), "--shapes", "odd rows")
    assert bad.returncode == 1 and "REJECTED at correctness" in bad.stdout
    assert _cli("no-such-task", str(cand)).returncode == 2
    capsys.readouterr()
    assert main(["eval", "softmax", str(tmp_path / "nope.py")]) == 2
    assert "nope.py" in capsys.readouterr().err
    assert main(["eval", "softmax", str(cand), "--shapes", "no such shape"]) == 2
    assert "no such shape" in capsys.readouterr().err


def test_a_verdict_on_some_shapes_only_says_which_were_skipped(softmax_task):
    """eval --shapes is for debugging: the verdict names the shapes it did not run (the long one
    here) and can never recommend a keep."""
    v = evaluate(softmax_task, softmax_task.baseline_path, options=EvalOptions(on_gpu=False, shapes=["short rows"]))
    assert v["accepted"] and v["partial"] == ["odd rows", "long row"]
    assert any("partial verdict" in n and "long row" in n for n in v["notes"])
    assert v["recommendation"]["action"] == "revert"
    assert cannot_keep_reason(v) == "not every shape was run (skipped: odd rows, long row)"


def test_a_partial_verdict_turns_a_keep_into_a_revert(softmax_task):
    from harness.evaluate.runner import _partial

    gpu_shapes = softmax_task.shapes_for(True)
    keep = {"recommendation": {"action": "keep", "reason": "1.2x", "can_keep": True}, "notes": []}
    v = _partial(keep, softmax_task, True, gpu_shapes[:1])
    assert v["recommendation"]["action"] == "revert" and not v["recommendation"]["can_keep"]
    assert "long rows 128k" in v["recommendation"]["reason"]
    full = {"recommendation": {"action": "keep", "reason": "1.2x", "can_keep": True}, "notes": []}
    assert _partial(full, softmax_task, True, gpu_shapes)["recommendation"]["action"] == "keep"

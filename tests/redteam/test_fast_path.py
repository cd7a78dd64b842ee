"""Issue 35's faster judge must open no path between evaluations: the incumbent's child now lives from
one evaluation to the next, and spares are started ahead. A candidate that leaves its inputs and
outputs wherever it can write is followed by one that answers from whatever it finds: the second is
accepted only if nothing of the first is visible to it, and the incumbent's kept child meets a
candidate's files nowhere either (both run sandboxed, each in its own scratch)."""
from __future__ import annotations

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate, timing_stage
from harness.authoring.tasks import load_task

PAIRS = Path(__file__).resolve().parent / "pairs"


def test_what_one_evaluation_leaves_behind_no_later_one_finds():
    task = load_task("softmax")
    opts = EvalOptions(on_gpu=False, static=False, heldout=False, shapes=["odd rows"], seed=5)
    first = evaluate(task, PAIRS / "leave_marker.py", options=opts)
    # It ran every call (writing its files), and the in-process watch saw it read its output's values
    # (torch.save): a hint, not what this test is about.
    assert {r["rule"] for r in first["reasons"]} == {"torch-compute"}, first["reasons"]
    second = evaluate(task, PAIRS / "find_marker.py", options=opts)
    assert second["accepted"], second["reasons"]  # it found nothing: its fallback is the honest kernel


def test_the_reader_does_answer_from_a_marker_where_one_is_visible(tmp_path, monkeypatch):
    """(The pair's second half is a real cheat: given the file, it serves the stale output.)"""
    import importlib.util

    import torch

    monkeypatch.setenv("HOME", str(tmp_path))
    y = torch.full((7, 1000), 0.5)
    torch.save({"x": y, "y": y}, tmp_path / "warpsmith-redteam-cache.pt")
    spec = importlib.util.spec_from_file_location("find_marker", PAIRS / "find_marker.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert torch.equal(mod.softmax(torch.randn(7, 1000)), y)
    timing_stage.INCUMBENTS.close()

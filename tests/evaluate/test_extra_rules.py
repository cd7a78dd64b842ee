"""A rules pack the session adds is enforced by the evaluator, not only shown to the agent."""
from __future__ import annotations

from pathlib import Path

from harness.evaluate import EvalOptions, evaluate
from harness.evaluate.runner import run_static
from harness.authoring.tasks import load_task

HOUSE_RULES = '''
id = "house-rules"
kind = "rules"
title = "House rules"
version = "0.1.0"
files = []
sources = ["our kernel review checklist"]

[[rule]]
id = "no-four-warps"
message = "Launch with 8 warps: 4 starve our memory pipeline."
query = """((keyword_argument name: (identifier) @k value: (integer) @v) @violation (#eq? @k "num_warps") (#eq? @v "4"))"""
'''


def house_rules(tmp_path: Path) -> Path:
    folder = tmp_path / "house-rules"
    folder.mkdir()
    (folder / "pack.toml").write_text(HOUSE_RULES)
    return folder


def test_a_selected_rules_pack_rejects_the_baseline_before_it_runs(tmp_path):
    task = load_task("softmax")  # its baseline launches with num_warps=4
    pack = house_rules(tmp_path)
    v = evaluate(task, task.baseline_path, options=EvalOptions(on_gpu=False, extra_rules=[str(pack)]))
    assert not v["accepted"] and v["stage"] == "static"
    assert [r["rule"] for r in v["reasons"]] == ["static:no-four-warps"]
    assert all(s["correct"] is None for s in v["shapes"])  # no child was started for it


def test_without_the_pack_the_same_source_passes_the_static_stage(tmp_path):
    task = load_task("softmax")
    source = task.baseline_path.read_text()
    assert run_static(task, source) == ([], "")
    found, _ = run_static(task, source, [str(house_rules(tmp_path))])
    assert [f["rule"] for f in found] == ["no-four-warps"]


def test_a_selected_pack_missing_on_this_machine_falls_back_to_its_id_or_says_so(tmp_path, monkeypatch):
    """On a Ray node the driver's pack folder does not exist: the same id installed there is used;
    with none, every candidate is refused with a message naming the pack, not tree-sitter."""
    task = load_task("softmax")
    source = task.baseline_path.read_text()
    elsewhere = str(tmp_path / "driver-machine" / "house-rules")  # the driver's path, absent here
    found, why = run_static(task, source, [elsewhere])
    assert found is None and "'house-rules' selected for this session is not on this machine" in why
    v = evaluate(task, task.baseline_path, options=EvalOptions(on_gpu=False, extra_rules=[elsewhere]))
    assert v["stage"] == "static" and "deselect" in v["reasons"][0]["message"]
    assert "tree-sitter" not in v["reasons"][0]["message"]
    installed = tmp_path / "node-packs"
    installed.mkdir()
    house_rules(installed)
    monkeypatch.setenv("WARPSMITH_PACKS", str(installed))
    found, _ = run_static(task, source, [elsewhere])
    assert [f["rule"] for f in found] == ["no-four-warps"]

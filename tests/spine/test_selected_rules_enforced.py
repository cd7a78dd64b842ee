"""A rules pack the person selects for a session (--packs, the TUI's picker) is enforced by the
evaluator, not only put in the prompt. Real session, catalog, build_loop and evaluator (interpreter)."""
from __future__ import annotations

import pytest

from harness.loop import AutoDecider
from harness.authoring.tasks import load_task
from harness.wiring import RunConfig, build_loop, start_session

NO_BLOCK_NAME = '''
id = "house-rules"
kind = "rules"
title = "House rules"
version = "0.1.0"
files = []
sources = ["our kernel review checklist"]

[[rule]]
id = "no-block-constant"
message = "Name block sizes after their axis (BLOCK_N), never plain BLOCK."
query = """((identifier) @violation (#eq? @violation "BLOCK"))"""
'''


@pytest.fixture
def house_rules(tmp_path, monkeypatch):
    folder = tmp_path / "shared-packs" / "house-rules"
    folder.mkdir(parents=True)
    (folder / "pack.toml").write_text(NO_BLOCK_NAME)
    monkeypatch.setenv("WARPSMITH_PACKS", str(folder.parent))
    return folder


def run_one(tmp_path, cfg: RunConfig) -> list[dict]:
    task = load_task("softmax")  # its baseline, and so every tuner candidate, has BLOCK
    session = start_session(task, cfg, base=tmp_path)
    loop = build_loop(session, task, cfg, AutoDecider(), lambda e: None)
    loop.run()
    return [r["verdict"] for r in session.journal.read() if r.get("kind") == "EvalResult"]


def test_a_selected_rules_pack_rejects_what_it_forbids(tmp_path, house_rules):
    verdicts = run_one(tmp_path, RunConfig(agent="tuner", iterations=1, auto=True, packs_add=["house-rules"]))
    assert len(verdicts) == 1 and verdicts[0]["stage"] == "static"
    assert {r["rule"] for r in verdicts[0]["reasons"]} == {"static:no-block-constant"}


def test_the_same_pack_only_found_not_selected_changes_nothing(tmp_path, house_rules):
    verdicts = run_one(tmp_path, RunConfig(agent="tuner", iterations=1, auto=True))
    assert len(verdicts) == 1 and verdicts[0]["accepted"]


def test_selecting_a_pack_that_failed_to_load_says_why(tmp_path, house_rules):
    (house_rules / "pack.toml").write_text(NO_BLOCK_NAME.replace('"no-block-constant"', '"No Block"'))
    task = load_task("softmax")
    cfg = RunConfig(agent="tuner", iterations=1, auto=True, packs_add=["house-rules"])
    session = start_session(task, cfg, base=tmp_path)
    with pytest.raises(ValueError) as e:
        build_loop(session, task, cfg, AutoDecider(), lambda e: None)
    # The pack exists but is broken: its file and line, not "no pack" (nor any other copy used).
    assert str(e.value).startswith(f"{house_rules / 'pack.toml'}:10: rule #1: id 'No Block'")


def test_resuming_with_a_selected_pack_that_broke_says_why_and_no_packs_takes_it_out(tmp_path, house_rules):
    from warpsmith.commands.sessions import change_packs

    task = load_task("softmax")
    cfg = RunConfig(agent="tuner", iterations=1, auto=True, packs_add=["house-rules"])
    session = start_session(task, cfg, base=tmp_path)
    for close in build_loop(session, task, cfg, AutoDecider(), lambda e: None).closers:
        close()
    (house_rules / "pack.toml").write_text(NO_BLOCK_NAME.replace('"no-block-constant"', '"No Block"'))
    with pytest.raises(ValueError) as e:  # what `warpsmith sessions resume ID` meets
        build_loop(session, task, RunConfig(agent="tuner", iterations=2, auto=True), AutoDecider(),
                   lambda e: None, resumed=True)
    assert "resume with --no-packs house-rules" in str(e.value) and "rule #1: id 'No Block'" in str(e.value)
    change_packs(session, None, "house-rules")  # `sessions resume ID --no-packs house-rules`
    loop = build_loop(session, task, RunConfig(agent="tuner", iterations=2, auto=True), AutoDecider(),
                      lambda e: None, resumed=True)
    for close in loop.closers:
        close()
    assert "house-rules" not in session.journalled_packs()

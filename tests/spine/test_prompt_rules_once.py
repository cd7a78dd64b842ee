"""The prompt states each enforced rule once: the system's rule list, not again in the DSL text."""
from __future__ import annotations

from harness.authoring.packs import discover, session_selection
from harness.prompt import _rule_items, build_prompt
from harness.authoring.tasks import load_task


def test_each_rule_message_appears_once_in_the_prompt():
    task = load_task("softmax")
    catalog = discover()
    sel, _, _ = session_selection(task, catalog, [], [], None)
    packs = sel.resolve(catalog)
    p = build_prompt(task, task.baseline_path.read_text(), packs)
    full = p.system + "\n" + p.user
    rules = [item for pack in packs if pack.kind == "rules" for item in _rule_items(pack)]
    assert rules
    for rid, message, _ in rules:
        assert full.count(message) == 1, rid
    # torch's limits are the torch-compute rule's; the DSL requirement doesn't restate them
    assert "Torch may only" not in p.system


def test_without_the_dsl_rules_pack_the_dsl_text_says_what_torch_may_do():
    task = load_task("softmax")
    p = build_prompt(task, task.baseline_path.read_text(), [])
    assert "Torch may only allocate outputs" in p.system

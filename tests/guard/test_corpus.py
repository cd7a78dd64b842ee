"""Every bad candidate of the corpus is rejected with the rule its first line names; every good one
is accepted. Bad files start with `# expect: <rule-id>`."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from harness.guard import check_source, rejected

CORPUS = Path(__file__).parent / "corpus"

BAD = sorted(CORPUS.glob("bad/*/*.py"))
GOOD = sorted(CORPUS.glob("good/*/*.py"))


def _id(p):
    return f"{p.parent.name}/{p.stem}"


def test_corpus_size_and_spread():
    assert len(BAD) >= 30 and len(GOOD) >= 15
    for files in (BAD, GOOD):
        dsls = Counter(p.parent.name for p in files)
        assert set(dsls) == {"triton", "cute", "cuda"}, dsls


@pytest.mark.parametrize("path", BAD, ids=_id)
def test_bad_candidate_rejected_with_expected_rule(path, task_for):
    source = path.read_text()
    first = source.splitlines()[0]
    assert first.startswith("# expect: "), f"{path}: first line must be '# expect: <rule-id>'"
    expected = first.split(":", 1)[1].strip()
    found = check_source(source, task_for(path.parent.name))
    assert rejected(found)
    assert expected in {v.rule for v in found if v.severity == "error"}, \
        f"{path.name}: expected {expected}, got {[(v.rule, v.line, v.message[-80:]) for v in found]}"


@pytest.mark.parametrize("path", GOOD, ids=_id)
def test_good_candidate_accepted(path, task_for):
    found = check_source(path.read_text(), task_for(path.parent.name))
    assert not rejected(found), [(v.rule, v.line, v.snippet, v.message[-100:]) for v in found]


def test_every_shipped_baseline_and_variant_passes_the_static_stage(softmax_task):
    # What warpsmith ships is what agents and the tuner start from: a candidate that copies a baseline
    # (the tuner only turns its literals) must not be rejected before any GPU time. The DeepSeek V4
    # decode baselines once were, over compiler diagnostics read through private attributes.
    from harness.authoring.tasks import load_task

    roots = sorted(p.parent for p in (Path(__file__).resolve().parents[2] / "kernels").glob("*/task.toml"))
    checked = []
    for root in roots:
        task = load_task(root, check_null=False)
        for rel in [task.baseline_path.name, *task.raw.get("variants", [])]:
            found = check_source((root / rel).read_text(), task)
            assert found == [], (root.name, rel, [(v.rule, v.line, v.snippet) for v in found])
            checked.append(f"{root.name}/{rel}")
    assert {"dsv4_csa_decode/kernel.py", "softmax/variants/split.py", "rmsnorm_cute/kernel.py"} <= set(checked)

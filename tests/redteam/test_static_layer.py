"""The static stage on red-team candidates that document it (`Static:`): the rules named must fire,
or, for "none", the candidate must get past the static stage (its cheat is then caught only at run
time, by the rule in `Expect:`, which test_redteam.py checks with the static stage off)."""
from __future__ import annotations

from pathlib import Path

import pytest
from redteam_catalog import CHEATS

from harness.guard import check_source
from harness.authoring.tasks import load_task

REPO = Path(__file__).resolve().parents[2]
DOCUMENTED = [c for c in CHEATS if c.static is not None]


def test_some_candidates_document_the_static_stage():
    assert len(DOCUMENTED) >= 8


@pytest.mark.parametrize("cheat", DOCUMENTED, ids=lambda c: c.name)
def test_static_stage(cheat):
    task = load_task(REPO / "kernels" / cheat.task)
    # The file's bytes, as the evaluator reads them (a coding cookie or a lone CR is part of some cheats).
    fired = {v.rule for v in check_source(cheat.path.read_bytes(), task) if v.severity == "error"}
    if cheat.static == ["none"]:
        assert not fired, f"{cheat.name} is documented to pass the static stage, but {sorted(fired)} fired"
        return
    missing = [s for s in cheat.static if not fired & {alt.strip() for alt in s.split("|")}]
    assert not missing, f"{cheat.name}: expected static {cheat.static}, got {sorted(fired)}"

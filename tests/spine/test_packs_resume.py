"""A pack selection changed mid-session (the TUI's picker: Session.set_packs) is what a resumed
session prompts with, even when the person quit before the next prompt. Real session folder, real
pack catalog, real build_loop and prompt builder; no loop iteration runs (no evaluator needed)."""
from __future__ import annotations

import json

import pytest

from harness.agents.base import ProposalContext
from harness.sessions.session import Session
from harness.authoring.tasks import load_task
from harness.wiring import RunConfig, build_loop, start_session


@pytest.fixture(scope="module")
def task():
    return load_task("softmax")


class NeverAsked:
    def decide(self, request):  # no iteration runs in these tests
        raise AssertionError("no decision expected")


def resume_prompt_packs(session: Session, task, cfg: RunConfig, it: int = 4) -> list[str]:
    """What `warpsmith sessions resume ID --iterations 5` builds: the loop from the session's saved
    options, then the prompt of the next iteration. Returns that prompt's pack ids."""
    again = Session.open(session.id, session.root.parent.parent.parent)
    known = RunConfig.__dataclass_fields__
    cfg = RunConfig(**{k: v for k, v in again.meta.options.items() if k in known})
    cfg.iterations = 5
    loop = build_loop(again, task, cfg, NeverAsked(), lambda e: None, resumed=True)
    try:
        ws = again.workspace
        ctx = ProposalContext(task, it, ws.source(ws.best), ws.best)
        _system, _user, packs = loop.prompt_builder(ctx)
    finally:
        for close in loop.closers:
            close()
    return [p["id"] for p in packs]


def started(tmp_path, task, cfg: RunConfig) -> Session:
    """A session as `warpsmith run` starts it: its first loop built (the start's selection)."""
    session = start_session(task, cfg, base=tmp_path)
    loop = build_loop(session, task, cfg, NeverAsked(), lambda e: None)
    for close in loop.closers:
        close()
    return session


def test_a_pack_added_before_quitting_is_in_the_resumed_prompt(tmp_path, task):
    session = started(tmp_path, task, RunConfig(agent="tuner", iterations=3))
    first = list(session.meta.packs)
    assert "h200" not in first  # not a default on this CPU-only machine
    session.set_packs(first + ["h200"])  # the picker at decision #3; then quit, no prompt built
    assert "h200" in resume_prompt_packs(session, task, RunConfig())
    picks = [r["packs"] for r in session.journal.read() if r.get("kind") == "PacksSelected"]
    assert picks == [first, first + ["h200"]]  # the start's selection, then the pick: nothing re-journalled
    assert json.loads((session.root / "session.json").read_text())["packs"] == first + ["h200"]


def test_a_pack_flag_from_the_start_does_not_undo_a_later_removal(tmp_path, task):
    session = started(tmp_path, task, RunConfig(agent="tuner", iterations=3, packs_add=["h200"]))
    assert "h200" in session.meta.packs
    session.set_packs([i for i in session.meta.packs if i != "h200"])  # removed in the picker
    assert "h200" not in resume_prompt_packs(session, task, RunConfig())


def test_a_session_from_before_journalled_selections_resumes_from_its_packs_json(tmp_path, task):
    from harness.authoring.packs import Selection

    session = started(tmp_path, task, RunConfig(agent="tuner", iterations=3))
    lines = [line for line in (session.root / "journal.jsonl").read_text().splitlines()
             if json.loads(line).get("kind") != "PacksSelected"]
    (session.root / "journal.jsonl").write_text("".join(line + "\n" for line in lines))
    Selection(["reward-hacks", "h200"]).save(session.root)
    assert sorted(resume_prompt_packs(session, task, RunConfig())) == ["h200", "reward-hacks"]
    assert session.journalled_packs() == ["reward-hacks", "h200"]  # journalled on that resume

"""The prompt a session's loop sends (harness.prompt.SessionPrompt, the one assembly build_loop gives the
loop): the packs the session has selected, the feedback on the last try, the step profile when the
session has one, and a selection changed mid-session from the next prompt on. Real session folder,
real built-in packs, no agent and no evaluator."""
from __future__ import annotations

import pytest

from harness import events as ev
from harness.agents.base import Attempt, ProposalContext
from harness.authoring.packs import PackWatcher, Selection, discover
from harness.prompt import STEP_PROFILE_FILE, SessionPrompt
from harness.sessions.session import Session
from harness.model.step_profile import StepProfile, StepRow
from harness.authoring.tasks import load_task


@pytest.fixture(scope="module")
def task():
    return load_task("softmax", check_null=False)


@pytest.fixture(scope="module")
def catalog():
    return discover()


@pytest.fixture
def session(tmp_path, task):
    return Session.create(task.name, "openai", task.baseline_path.read_text(), base=tmp_path)


def assembly(session, task, catalog, packs, said, reads_prompt=True):
    session.set_packs(packs)
    watcher = PackWatcher(Selection(packs).resolve(catalog))
    return SessionPrompt(session, task, catalog, watcher, emit=said.append, reads_prompt=lambda: reads_prompt)


def ask(prompt, task, session, iteration=1, history=()):
    ws = session.workspace
    return prompt(ProposalContext(task, iteration, ws.source(ws.best), ws.best, list(history)))


def test_the_prompt_carries_the_packs_the_session_selected(session, task, catalog):
    said: list = []
    system, user, packs = ask(assembly(session, task, catalog, ["h200", "reward-hacks"], said), task, session)
    assert [p["id"] for p in packs] == ["h200", "reward-hacks"]
    assert packs[0]["sha256"] == catalog.get("h200").sha256()
    assert '<pack id="h200" kind="hardware"' in user and '<pack id="reward-hacks" kind="rules"' in user
    assert "(reward-hacks; " in system  # its rules in the never-do list
    assert said == []


def test_a_selection_changed_mid_session_applies_from_the_next_prompt(session, task, catalog):
    said: list = []
    prompt = assembly(session, task, catalog, ["reward-hacks"], said)
    assert [p["id"] for p in ask(prompt, task, session, 1)[2]] == ["reward-hacks"]
    session.set_packs(["reward-hacks", "h200"])  # the TUI's picker, between two prompts
    _system, user, packs = ask(prompt, task, session, 2)
    assert [p["id"] for p in packs] == ["h200", "reward-hacks"] and '<pack id="h200"' in user
    session.set_packs(["h200"])
    assert [p["id"] for p in ask(prompt, task, session, 3)[2]] == ["h200"]
    assert said == []


def test_a_selection_that_no_longer_resolves_keeps_the_last_packs_and_says_why(session, task, catalog):
    said: list = []
    prompt = assembly(session, task, catalog, ["h200"], said)
    session.set_packs(["h200", "no-such-pack"])  # picked, then gone from disk
    assert [p["id"] for p in ask(prompt, task, session, 4)[2]] == ["h200"]
    assert session.meta.packs == ["h200"] and session.journalled_packs() == ["h200"]  # journalled again
    assert len(said) == 1 and isinstance(said[0], ev.AgentNotice)
    assert said[0].iteration == 4 and said[0].level == "warning"
    assert said[0].message.startswith("pack selection unchanged: ") and "no-such-pack" in said[0].message


def test_the_feedback_is_on_the_last_try_that_ended(session, task, catalog):
    prompt = assembly(session, task, catalog, [], [])
    history = [Attempt(1, "BLOCK=128", "kept", "4k x 4k: 10.0 us vs 11.0 us"),
               Attempt(2, "num_warps=8", "reverted", "4k x 4k: 10.5 us vs 10.0 us", veto_reason="too risky"),
               Attempt(3, "num_stages=3", "in-flight")]  # still being measured: no outcome to hear about
    user = ask(prompt, task, session, 4, history)[1]
    feedback = user[user.index("# Feedback on the last attempt"):]
    assert "Attempt #2 (num_warps=8) ended reverted." in feedback
    assert "4k x 4k: 10.5 us vs 10.0 us" in feedback and "The person reverted it, saying: too risky" in feedback
    assert "num_stages=3" not in feedback
    user = ask(prompt, task, session, 2, history[:1])[1]
    assert "Attempt #1 was kept and is now the incumbent. 4k x 4k: 10.0 us vs 11.0 us" in user
    assert "# Feedback on the last attempt" not in ask(prompt, task, session, 1)[1]  # nothing tried yet


def step_profile() -> StepProfile:
    rows = [StepRow("softmax (task kernel)", "task", calls=1, share=0.6, bound="memory", roofline_pct=0.4, gain=1.5),
            StepRow("aten::mm", "op", calls=3, share=0.4, bound="compute")]
    return StepProfile("softmax", "one decode step", "NVIDIA H200", True, None, rows)


def test_the_step_profile_is_in_the_prompt_when_the_session_has_one(session, task, catalog):
    prompt = assembly(session, task, catalog, [], [])
    assert "Where one step of" not in ask(prompt, task, session)[1]
    step_profile().save(session.root / STEP_PROFILE_FILE)  # what the TUI's profile screen (w) writes
    user = ask(prompt, task, session)[1]
    assert user.rstrip().endswith("- aten::mm: 40% of the step, compute")
    assert "Where one step of one decode step spends its time (measured; top 2):" in user
    assert "- softmax (task kernel): 60% of the step, memory, 40% of roofline, step 1.50x at roofline" in user
    # an agent that doesn't read its prompt (the tuner) is spared it
    assert "Where one step of" not in ask(assembly(session, task, catalog, [], [], reads_prompt=False),
                                          task, session)[1]
    # an unreadable profile costs this section, never the prompt
    (session.root / STEP_PROFILE_FILE).write_text("{not json")
    assert "Where one step of" not in ask(prompt, task, session)[1]

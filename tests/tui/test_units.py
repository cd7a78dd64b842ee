"""The TUI's plain-Python parts: the decider's blocking and rules, diff alignment, state tally."""
from __future__ import annotations

import threading
import time

import pytest

from harness import events as ev
from harness.loop import DecisionReply, DecisionRequest
from harness.evaluate.records import Verdict
from tui.decider import DecisionAborted, TuiDecider
from tui.state import MAX_TURNS, CandidateView, RunState
from tui.widgets.diff import render_full, render_unified, split_pairs, unified_rows
from tui.widgets.status import short_device, status_text
from tui_helpers import FakeClock


def request(action="keep", can_keep=True, it=1) -> DecisionRequest:
    return DecisionRequest(it, "c0ffee", "desc", Verdict.empty(), action, "because", can_keep)


def test_decider_blocks_until_a_reply_and_guards_early_keys():
    clock = FakeClock()
    shown = threading.Event()
    d = TuiDecider(lambda req: shown.set(), key_guard_s=0.3, clock=clock)
    out: list[DecisionReply] = []
    t = threading.Thread(target=lambda: out.append(d.decide(request())))
    t.start()
    assert shown.wait(5)
    assert not d.check_keep().accepted  # not on screen yet
    d.mark_shown()
    clock.advance(0.29)
    assert "too soon" in d.check_keep().message and not d.check_revert().accepted
    clock.advance(0.02)
    assert d.check_keep().accepted and not d.check_keep().needs_confirmation
    assert t.is_alive()  # still waiting: checks decide nothing
    assert d.reply(DecisionReply("keep", "human"))
    t.join(5)
    assert out[0].action == "keep" and d.pending is None
    assert not d.reply(DecisionReply("revert"))  # no question open: ignored


def test_decider_rules_for_override_and_unkeepable():
    clock = FakeClock()
    d = TuiDecider(lambda req: None, key_guard_s=0.0, clock=clock)
    d._pending = request(action="revert", can_keep=True)
    d.mark_shown()
    v = d.check_keep()
    assert v.accepted and v.needs_confirmation and "recommends revert" in v.message
    d._pending = request(action="revert", can_keep=False)
    v = d.check_keep()
    assert not v.accepted and "cannot keep" in v.message
    assert d.check_revert().accepted


def test_decider_abort_raises_in_the_loop_thread_and_auto_skips_the_question():
    d = TuiDecider(lambda req: None)
    errors = []

    def run():
        try:
            d.decide(request())
        except DecisionAborted:
            errors.append("aborted")

    t = threading.Thread(target=run)
    t.start()
    d.abort()
    t.join(5)
    assert errors == ["aborted"]
    auto = TuiDecider(lambda req: pytest.fail("auto mode must not ask"), auto=True)
    assert (auto.decide(request(action="revert")).action, auto.decide(request()).by) == ("revert", "auto")


def test_turning_auto_on_answers_the_open_question_by_the_policy():
    d = TuiDecider(lambda req: None)
    got = []
    t = threading.Thread(target=lambda: got.append(d.decide(request(action="revert"))))
    t.start()
    while d.pending is None:
        time.sleep(0.01)
    assert d.set_auto(False) is None  # off: nothing answered
    answer = d.set_auto(True)
    t.join(5)
    assert (answer.action, answer.by) == ("revert", "auto") and got == [answer]
    assert d.set_auto(True) is None  # no question open


OLD = "a\nb\nc\nd\n"
NEW = "a\nB\nc\nd\ne\n"


def test_diff_rows_and_split_alignment():
    rows = unified_rows(OLD, NEW)
    assert [(r.tag, r.old_no, r.new_no) for r in rows] == [
        ("@", None, None), (" ", 1, 1), ("-", 2, None), ("+", None, 2), (" ", 3, 3), (" ", 4, 4), ("+", None, 5)]
    assert split_pairs(OLD, NEW) == [(1, 1), (2, 2), (3, 3), (4, 4), (None, 5)]


def test_violations_are_marked_at_their_candidate_line():
    c = CandidateView(2, "abc", "d", OLD, NEW, violations=[{"rule": "no-x", "message": "bad", "line": 5},
                                                           {"rule": "dsl-triton", "message": "no kernel"}])
    lines = [t.plain for t in render_unified(c).renderable.renderables]
    at5 = next(i for i, s in enumerate(lines) if s.rstrip().endswith("e") and "   5 " in s)
    assert lines[at5][10] == "!"  # gutter: old no, new no, then the mark instead of "+"
    assert lines[at5 + 1].strip() == "^ no-x: bad"
    assert any(s.startswith("! file: dsl-triton") for s in lines)  # no line: listed at the top
    full = [t.plain for t in render_full(c).renderable.renderables]
    at5 = next(i for i, s in enumerate(full) if s.startswith("   5"))
    assert full[at5].startswith("   5!") and full[at5 + 1].strip() == "^ no-x: bad"


def test_state_tally_best_history_and_pruning():
    s = RunState()
    good = {"accepted": True, "stage": "done", "geomean_speedup": 1.25}
    static = {"accepted": False, "stage": "static"}
    wrong = {"accepted": False, "stage": "correctness"}
    crash = {"accepted": False, "stage": "import", "reasons": [{"rule": "crashed"}]}
    for it, (v, action) in enumerate([(good, "keep"), (good, "revert"), (static, "revert"),
                                      (wrong, "revert"), (crash, "revert")], 1):
        s.apply(ev.IterationStarted(it))
        s.apply(ev.EvalResult(it, Verdict.from_json(v)))
        s.apply(ev.Decision(it, action, "human"))
    assert dict(s.tally) == {"kept": 1, "reverted": 1, "rejected": 1, "incorrect": 1, "crashed": 1}
    assert s.best_history == [1.25] * 5 and s.best_speedup == 1.25
    for it in range(6, 6 + MAX_TURNS + 2):
        s.apply(ev.IterationStarted(it))
    assert len(s.turns) == MAX_TURNS and s.pruned_turns == 7


@pytest.mark.parametrize("n, words", [(1, "after 1 iteration"), (3, "after 3 iterations"), (0, "after 0 iterations")])
def test_session_end_note_counts_iterations_in_good_english(n, words):
    s = RunState()
    s.apply(ev.SessionEnded("iteration limit", "c0ffee1234", n))
    assert s.turns[-1].blocks[-1].text.endswith(words)


def test_state_counts_dsl_and_rule_breaks_per_model():
    s = RunState(agent="anthropic:m1")
    s.apply(ev.CandidateProposed(1, "c1", "d", "", "src", "anthropic", "m1"))
    s.apply(ev.StaticResult(1, False, [{"rule": "triton-launch", "message": "no kernel", "line": 3}]))
    s.apply(ev.CandidateProposed(2, "c2", "d", "", "src", "anthropic", "m1"))
    s.apply(ev.StaticResult(2, False, [{"rule": "no-torch-fallback", "message": "x", "line": 9}]))
    st = s.model_stats["anthropic:m1"]
    assert (st.candidates, st.dsl_breaks, st.rule_breaks) == (2, 1, 1)
    assert any("no-torch-fallback" in b.text for b in s.turns[-1].blocks)


def test_an_agent_switch_is_a_typed_event_and_an_old_notice_of_one_stays_a_notice():
    s = RunState(agent="tuner")
    areas = s.apply(ev.AgentSwitched(3, "anthropic", "claude-x"))
    assert s.agent == "anthropic:claude-x" and {"status", "bench"} <= areas
    assert s.turn(3).blocks[-1].text == "agent switched to anthropic:claude-x"  # a line in the reasoning pane
    # a journal from before the event: its notice loads, replays as a line, and changes nothing else
    old = ev.Event.from_json({"kind": "AgentNotice", "iteration": 4, "level": "info",
                              "message": "agent switched to openai:gpt-x"})
    assert s.apply(old) == {"reasoning"} and s.agent == "anthropic:claude-x"
    assert s.turn(4).blocks[-1].text == "agent switched to openai:gpt-x"
    again = ev.Event.from_json(ev.AgentSwitched(3, "anthropic", "claude-x").to_json())
    assert again == ev.AgentSwitched(3, "anthropic", "claude-x")  # journalled by its fields


def test_seal_point_cuts_at_paragraphs_outside_code_fences():
    from tui.widgets.reasoning import SEAL_CHARS, seal_point

    para = "x" * 100 + "\n\n"
    text = para * (SEAL_CHARS // len(para) + 5)
    cut = seal_point(text, 0, len(text))
    assert cut is not None and text[cut - 2:cut] == "\n\n" and cut >= SEAL_CHARS // 2
    fenced = "```python\n" + text  # an open fence: freezing now would split the code block
    assert seal_point(fenced, 0, len(fenced)) is None
    assert seal_point("short\n\ntext", 0, 11) is None


def _busy_state(**kw) -> RunState:
    base = dict(task="dsv4_csa_decode_fp8", agent="anthropic:claude-sonnet-4-5-20250929", device="NVIDIA H200",
                packs=["h200", "reward-hacks", "dsl-triton", "long-context"], iteration=137, phase="evaluating",
                input_tokens=12_345_678, output_tokens=987_654, cost_usd=123.45)
    return RunState(**{**base, **kw})


def test_status_line_fits_80_columns_keeping_mode_task_iteration_and_cost():
    for state in (_busy_state(), _busy_state(mode="auto", paused=True),
                  RunState(task="softmax", agent="script:demo", device="NVIDIA H200", packs=["h200", "reward-hacks"],
                           iteration=2, phase="deciding", input_tokens=10610, output_tokens=1440, cost_usd=0.04)):
        line = status_text(state, 80)
        assert line.cell_len <= 80 and "\n" not in line.plain and line.no_wrap, line.plain
        assert "MANUAL" in line.plain or "AUTO" in line.plain
        assert f"{state.task} #{state.iteration}" in line.plain and f"${state.cost_usd:.2f}" in line.plain
    demo = status_text(RunState(task="softmax", agent="script:demo", device="NVIDIA H200", packs=["h200", "x"],
                                iteration=2, phase="deciding", input_tokens=10610, output_tokens=1440), 80).plain
    assert "script:demo" in demo and "tok 10.6k/1.4k" in demo and demo.endswith("│ H200")  # shortened, not dropped


def test_status_line_drops_nothing_when_wide_and_shrinks_in_priority_order():
    state = _busy_state()
    full = status_text(state, 300).plain
    assert full == status_text(state).plain
    assert "packs h200,reward-hacks,dsl-triton,long-context" in full and "tok 12345678/987654" in full
    assert "NVIDIA H200" in full and "anthropic:claude-sonnet-4-5-20250929" in full
    widths = range(len(full), 10, -1)
    assert all(status_text(state, w).cell_len <= w for w in widths)
    # packs go before the agent, the agent before the cost
    assert any("packs" not in status_text(state, w).plain and "anthropic" in status_text(state, w).plain
               for w in widths)
    assert "$123.45" in status_text(state, 50).plain


def test_short_device_names():
    assert short_device("NVIDIA H200") == "H200"
    assert short_device("NVIDIA GeForce RTX 4090") == "RTX 4090"
    assert short_device("NVIDIA H100 80GB HBM3") == "H100"
    assert short_device("cpu (Triton interpreter)") == "cpu"
    assert short_device("") == "-"


def test_a_new_iteration_redraws_the_bench_whose_verdict_just_became_the_previous_one():
    s = RunState()
    s.apply(ev.IterationStarted(1))
    s.apply(ev.EvalResult(1, Verdict.from_json({"accepted": True, "shapes": []})))
    assert "bench" in s.apply(ev.IterationStarted(2))


def test_an_undecided_verdict_is_not_called_previous_when_a_parallel_iteration_starts():
    from tui.widgets.bench import is_previous

    s = RunState()
    s.apply(ev.IterationStarted(1))
    s.apply(ev.EvalResult(1, Verdict.from_json({"accepted": True, "shapes": []})))
    s.apply(ev.IterationStarted(2))  # --proposals 2: #2 starts while #1 waits for the person
    assert not is_previous(s)
    s.apply(ev.Decision(1, "revert", "human"))
    assert is_previous(s)


def test_a_keep_without_timing_leaves_the_best_speedup_unknown_not_one():
    from tui.widgets.bench import tally_text

    s = RunState()
    s.apply(ev.IterationStarted(1))
    s.apply(ev.EvalResult(1, Verdict.from_json({"accepted": True, "shapes": [], "geomean_speedup": None})))
    assert "best speedup" not in tally_text(s).plain  # nothing timed: no figure, not even the baseline's 1.000x
    s.apply(ev.Decision(1, "keep", "human", override=True))
    assert "unknown" in tally_text(s).plain and "1.000x" not in tally_text(s).plain


def test_the_best_speedup_shows_once_something_was_timed():
    from tui.widgets.bench import tally_text

    s = RunState()
    s.apply(ev.IterationStarted(1))
    assert "best speedup" not in tally_text(s).plain  # no verdict yet
    s.apply(ev.EvalResult(1, Verdict.from_json({"accepted": True, "timing_available": True, "geomean_speedup": 0.98,
                              "shapes": [{"name": "a", "correct": True, "speedup": 0.98}]})))
    assert "best speedup over baseline 1.000x" in tally_text(s).plain  # measured: the baseline is still best


def test_the_tally_breaks_a_line_between_two_counts_never_inside_one():
    import io

    from rich.console import Console

    from tui.widgets.bench import Flow, tally_items

    s = RunState()
    full = sum(t.cell_len for t in tally_items(s)) + 2 * (len(tally_items(s)) - 1)
    for width in range(12, full + 2):
        console = Console(width=width, file=io.StringIO(), record=True)
        console.print(Flow(tally_items(s)))
        lines = console.export_text().splitlines()
        assert all(line.strip() and not line.strip().isdigit() for line in lines), (width, lines)
        assert (len(lines) == 1) == (width >= full - (len(tally_items(s)) - 1))  # one column apart, at a pinch
        assert " ".join(" ".join(lines).split()) == "kept 0 reverted 0 rejected 0 incorrect 0 crashed 0"


def test_an_ended_session_redraws_the_bench():
    s = RunState()
    s.apply(ev.IterationStarted(5))
    assert "bench" in s.apply(ev.SessionEnded("no untried neighbour", "c0ffee1234", 4))

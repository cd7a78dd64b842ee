"""Headless runs as a person at a terminal meets them: the y/n prompt, what it shows before asking,
why a candidate can't be kept, Ctrl+C, and resuming a session that has nothing left to do."""
from __future__ import annotations

import io
import re

import pytest

from harness import events as ev
from harness.agents.tuner import TunerAgent
from warpsmith.cli import main
from harness.headless import Printer, StdinDecider, cannot_keep_reason, shape_table
from harness.loop import AutoDecider, DecisionRequest, Loop
from harness.authoring.tasks import load_task
from harness.wiring import RunConfig, start_session
from harness.sessions.workspace import unified_diff
from harness.evaluate.records import Verdict

TASK = load_task("softmax", check_null=False)
BASELINE = TASK.baseline_path.read_text()
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def request(action="revert", can_keep=True, verdict=None, commit="c" * 40, iteration=1) -> DecisionRequest:
    v = verdict or {"accepted": True, "stage": "done", "reasons": [], "shapes": []}
    return DecisionRequest(iteration, commit, "BLOCK 1024 -> 2048", Verdict.from_json(v), action, "no GPU here", can_keep)


def ask(answers: str, req: DecisionRequest | None = None, **kw):
    out = io.StringIO()
    reply = StdinDecider(io.StringIO(answers), out, **kw).decide(req or request())
    return reply, out.getvalue()


# -- answers ---------------------------------------------------------------------------------

def test_the_veto_reason_reaches_the_agent_verbatim_whatever_the_case_of_the_keyword():
    reply, _ = ask("N: BLOCK 4096 too big for short rows\n")
    assert (reply.action, reply.reason) == ("revert", "BLOCK 4096 too big for short rows")
    reply, _ = ask("no: Keep NUM_WARPS=8: it Matters\n")
    assert (reply.action, reply.reason) == ("revert", "Keep NUM_WARPS=8: it Matters")


@pytest.mark.parametrize("confirm", ["y", "yes", "Y", "YES"])
def test_keeping_against_the_recommendation_is_confirmed_by_y_or_yes(confirm):
    reply, out = ask(f"y\n{confirm}\n")
    assert (reply.action, reply.confirmed_override) == ("keep", True)
    assert out.count("keep candidate 1?") == 1  # not asked the first question again


@pytest.mark.parametrize("confirm", ["n", "no", ""])
def test_declining_the_confirmation_reverts(confirm):
    reply, out = ask(f"y\n{confirm}\n")
    assert (reply.action, reply.by, reply.confirmed_override) == ("revert", "human", False)
    assert out.count("keep candidate 1?") == 1


def test_declining_the_confirmation_can_carry_a_reason():
    reply, _ = ask("y\nn: On Second Thought\n")
    assert (reply.action, reply.reason) == ("revert", "On Second Thought")


@pytest.mark.parametrize("word", ["nope", "yolo", "maybe", "y: fine", "b"])
def test_an_unrecognised_answer_says_what_is_accepted_and_asks_again(word):
    reply, out = ask(f"{word}\nn\n")
    assert reply.action == "revert" and reply.reason == ""
    assert "answer y (keep), n (revert), n: reason" in out
    assert out.count("keep candidate 1?") == 2


def test_an_unrecognised_confirmation_says_what_is_accepted():
    reply, out = ask("y\nyolo\nyes\n")
    assert reply.action == "keep" and reply.confirmed_override
    assert "answer y (keep it anyway), n (revert)" in out
    assert out.count("Keep anyway?") == 2


def test_enter_takes_the_recommendation_and_a_closed_stdin_follows_it_as_nobodys_choice():
    assert ask("\n", request(action="keep"))[0].action == "keep"
    assert ask("\n")[0].action == "revert"
    reply, _ = ask("y\n")  # stdin ends at the confirmation
    assert (reply.action, reply.by) == ("revert", "auto")


# -- why a candidate can't be kept -------------------------------------------------------------

SYNTAX = {"accepted": False, "stage": "static",
          "reasons": [{"rule": "static:python-syntax", "message": "not valid Python: invalid syntax at line 38"}],
          "violations": [{"rule": "python-syntax", "message": "x", "line": 38, "col": 12, "severity": "error"}]}


@pytest.mark.parametrize("verdict, expected", [
    (SYNTAX, "rejected at the static check (python-syntax, line 38)"),
    ({"stage": "import", "reasons": [{"rule": "import-error", "message": "m"}]}, "rejected at import (import-error)"),
    ({"stage": "correctness", "reasons": [{"rule": "mismatch", "message": "[a] m"}, {"rule": "mismatch", "message": "[b] m"}]},
     "rejected at the correctness check (mismatch)"),
    ({"stage": "guard", "reasons": [{"rule": "torch-compute", "message": "m"}]}, "rejected at a runtime guard (torch-compute)"),
    ({"stage": "timing", "reasons": [{"rule": "impossible-time", "message": "m"}]}, "rejected at timing (impossible-time)"),
])
def test_a_candidate_that_cannot_be_kept_is_told_by_the_stage_and_rule_that_stopped_it(verdict, expected):
    assert cannot_keep_reason(verdict) == expected


def test_headless_names_the_real_stage_of_an_unkeepable_candidate_and_refuses_y():
    out = io.StringIO()
    printer = Printer(out)
    printer(ev.EvalResult(1, Verdict.from_json(SYNTAX)))
    printer(ev.Recommendation(1, "revert", "rejected: static:python-syntax: ...", False))
    assert "[1] cannot be kept: rejected at the static check (python-syntax, line 38)" in out.getvalue()
    assert "correctness or a guard" not in out.getvalue()
    reply, said = ask("y\nn: Fix The Paren\n", request(can_keep=False, verdict=SYNTAX))
    assert (reply.action, reply.by, reply.reason) == ("revert", "human", "Fix The Paren")
    assert "candidate 1 cannot be kept: rejected at the static check (python-syntax, line 38)" in said
    assert "correctness or a guard" not in said


# -- the diff before the question ----------------------------------------------------------------

def proposed(source: str, commit="c" * 40, incumbent="i" * 40) -> ev.CandidateProposed:
    return ev.CandidateProposed(1, commit, "d", unified_diff(BASELINE, source), source, incumbent=incumbent)


def test_the_prompt_shows_the_candidates_diff_against_the_incumbent_before_asking(tmp_path):
    p = proposed(BASELINE.replace("BLOCK = 1024", "BLOCK = 2048"))
    _, out = ask("n\n", proposals={p.commit: p}, repo=tmp_path)
    shown = out[:out.index("keep candidate 1?")]
    assert "diff against the incumbent iiiiiiiiii" in shown
    assert "    -BLOCK = 1024\n    +BLOCK = 2048\n" in shown
    assert "def softmax" not in shown  # compact: a few lines of context, not the whole file
    assert "\x1b[" not in out  # not a terminal: plain text


def test_a_long_diff_is_capped_with_the_command_that_shows_all_of_it(tmp_path):
    long = BASELINE + "".join(f"\nEXTRA_{i} = {i}" for i in range(200))
    p = proposed(long)
    _, out = ask("n\n", proposals={p.commit: p}, repo=tmp_path / "repo")
    body = [line for line in out.splitlines() if line.startswith("    ") and "…" not in line]
    assert len(body) == 80
    total = len(p.diff.splitlines())
    assert f"… {total - 80} more lines; full diff: git -C {tmp_path / 'repo'} diff iiiiiiiiii cccccccccc" in out


def test_the_diff_is_coloured_on_a_terminal(tmp_path):
    p = proposed(BASELINE.replace("BLOCK = 1024", "BLOCK = 2048"))
    _, out = ask("n\n", proposals={p.commit: p}, repo=tmp_path, color=True)
    assert "\x1b[" in out
    plain = ANSI.sub("", out)
    assert "    -BLOCK = 1024\n    +BLOCK = 2048\n" in plain


def test_the_automatic_decider_shows_no_diff(tmp_path):
    out = io.StringIO()
    s = start_session(TASK, RunConfig(auto=True, iterations=1), base=tmp_path)
    verdict = {"accepted": True, "stage": "done", "reasons": [], "shapes": [], "timing_available": False,
               "recommendation": {"action": "revert", "reason": "canned", "can_keep": True}}
    Loop(s, TASK, TunerAgent(), AutoDecider(), lambda *a: verdict, emit=Printer(out), max_iterations=1).run()
    assert "decision: revert by auto" in out.getvalue()
    assert "diff against the incumbent" not in out.getvalue()


def test_headless_and_eval_name_the_time_columns_alike():
    from warpsmith.commands.eval import print_table

    shape = {"name": "a", "correct": True, "candidate_us": 1.0, "incumbent_us": 2.0, "speedup": 2.0,
             "noise_pct": 1.0, "roofline_pct": 50.0, "candidate_graph_us": None}
    headless = shape_table(Verdict.from_json({"shapes": [shape]}))[0]
    buf = io.StringIO()
    print_table(Verdict.from_json({"accepted": True, "stage": "done", "task": "softmax", "device": "d", "wall_s": 1.0,
                                   "shapes": [shape], "geomean_speedup": 2.0, "noise_band_pct": 1.0,
                                   "timing_available": True, "reasons": [], "notes": [],
                                   "recommendation": {"action": "keep", "reason": "faster"}}), buf)
    for words in ("cand µs", "best µs"):
        assert words in headless and words in buf.getvalue()
    assert "inc µs" not in buf.getvalue() and "cand us" not in headless


def test_a_verdict_without_shapes_prints_no_empty_table_header():
    assert shape_table(Verdict.from_json(SYNTAX)) == []


# -- Ctrl+C and resume ----------------------------------------------------------------------------

def test_ctrl_c_in_a_headless_run_prints_how_to_resume_and_keeps_the_journal(tmp_path, monkeypatch, capsys):
    import harness.wiring
    from warpsmith.commands.run import run_headless

    s = start_session(TASK, RunConfig(auto=True), base=tmp_path)

    class Interrupted:
        def run(self):
            s.record(ev.IterationStarted(1).to_dict())
            raise KeyboardInterrupt

    monkeypatch.setattr(harness.wiring, "build_loop", lambda *a, **k: Interrupted())
    try:
        rc = run_headless(s, TASK, RunConfig(auto=True))
    except KeyboardInterrupt:
        pytest.fail("Ctrl+C went past the headless run: nothing said how to resume")
    assert rc == 130
    err = capsys.readouterr().err
    assert err.strip().splitlines()[-1] == f"interrupted; resume: warpsmith sessions resume {s.id} --headless"
    assert [r["kind"] for r in s.journal.read()] == ["IterationStarted"]


def finished_session(tmp_path, iterations=2, undecided_last=False):
    """A session that ran `iterations` iterations to the end (or was killed before the last decision)."""
    s = start_session(TASK, RunConfig(iterations=iterations), base=tmp_path)
    verdict = {"accepted": True, "stage": "done", "reasons": [], "shapes": [], "timing_available": False,
               "recommendation": {"action": "revert", "reason": "canned", "can_keep": True}}

    class Decide:
        n = 0

        def decide(self, req):
            self.n += 1
            if undecided_last and self.n == iterations:
                raise KeyboardInterrupt  # killed while asking
            return AutoDecider().decide(req)

    try:
        Loop(s, TASK, TunerAgent(), Decide(), lambda *a: verdict, max_iterations=iterations).run()
    except KeyboardInterrupt:
        pass
    return s


def test_resuming_a_session_that_ran_all_its_iterations_says_how_to_continue(tmp_path, monkeypatch, capsys):
    import harness.wiring

    monkeypatch.chdir(tmp_path)
    s = finished_session(tmp_path)
    monkeypatch.setattr(harness.wiring, "build_loop", lambda *a, **k: pytest.fail("nothing to run"))
    assert main(["sessions", "resume", s.id, "--headless"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == (f"session {s.id} already ran its 2 iterations; to run 10 more: "
                   f"warpsmith sessions resume {s.id} --iterations 10 --headless")
    assert main(["sessions", "resume", s.id, "--headless", "--total", "2"]) == 0
    assert "2 iterations, as many as --total 2" in capsys.readouterr().out


def test_resume_iterations_means_that_many_more_and_says_so_before_it_runs(tmp_path, monkeypatch, capsys):
    """`--iterations 2` on a session that ran 2 runs 2 more (to #4), said on this first call; `--total 3`
    is the other reading, one more."""
    import harness.wiring

    monkeypatch.chdir(tmp_path)
    s = finished_session(tmp_path)
    limits = []

    class Resumed:
        def run(self):
            return "iterations done"

    def build(session, task, cfg, *a, **k):
        limits.append(cfg.iterations)
        return Resumed()

    monkeypatch.setattr(harness.wiring, "build_loop", build)
    assert main(["sessions", "resume", s.id, "--headless", "--auto", "--iterations", "2"]) == 0
    err = capsys.readouterr().err
    assert f"resuming {s.id}: 2 more iterations, to #4 (2 started before)" in err
    assert main(["sessions", "resume", s.id, "--headless", "--auto", "--total", "3"]) == 0
    assert "up to its limit of 3 iterations (1 more), to #3" in capsys.readouterr().err
    assert limits == [4, 3]
    with pytest.raises(SystemExit) as one_reading_at_a_time:
        main(["sessions", "resume", s.id, "--iterations", "1", "--total", "3"])
    assert one_reading_at_a_time.value.code == 2


def test_a_session_killed_before_its_last_decision_is_resumed_not_refused(tmp_path, monkeypatch, capsys):
    import harness.wiring

    monkeypatch.chdir(tmp_path)
    s = finished_session(tmp_path, undecided_last=True)
    resumed = []

    class Resumed:
        def run(self):
            resumed.append(True)
            return "iterations done"

    monkeypatch.setattr(harness.wiring, "build_loop", lambda *a, **k: Resumed())
    assert main(["sessions", "resume", s.id, "--headless", "--auto"]) == 0
    assert resumed and "already ran" not in capsys.readouterr().out


def test_keys_typed_at_the_terminal_before_a_question_do_not_answer_it():
    """A 'y' typed ahead (during an evaluation, or twice for one prompt) is discarded when the
    question appears; what is typed after it answers. Real pseudo-terminal."""
    import os
    import threading

    from harness.headless import StdinDecider
    from harness.loop import DecisionRequest

    master, slave = os.openpty()
    inp = os.fdopen(slave, "r")
    asked = threading.Event()

    class Out(io.StringIO):
        def flush(self):
            if "keep candidate 1?" in self.getvalue():
                asked.set()

    out = Out()
    os.write(master, b"y\ny\n")  # typed ahead
    replies = []
    t = threading.Thread(target=lambda: replies.append(StdinDecider(inp, out).decide(
        DecisionRequest(1, "c0ffee", "desc", Verdict.empty(), "revert", "not faster", True))))
    t.start()
    assert asked.wait(5)
    os.write(master, b"n: Typed After The Question\n")
    t.join(5)
    os.close(master)
    assert replies and replies[0].action == "revert" and replies[0].reason == "Typed After The Question"

"""Per-call time limits: from the task (call_timeout_s / interpreter_call_timeout_s), overridden by
`--timeout` with one meaning in `run` and `eval`, shown while a candidate runs, and a hanging
candidate costs at most that limit (in Triton's interpreter, with a limit of a few seconds)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from warpsmith.cli import main
from harness.sessions.journal import Journal
from harness.authoring.tasks import DEFAULT_CALL_TIMEOUT_S, DEFAULT_INTERPRETER_CALL_TIMEOUT_S, TaskError, load_task

ROOT = Path(__file__).resolve().parents[2]
HANG = ROOT / "tests" / "spine" / "data" / "hang_in_kernel.py"  # passes the static checks


def _task_with(tmp_path: Path, extra_toml: str) -> Path:
    """A copy of softmax under ./kernels/slowmax with `extra_toml` added at the top of task.toml."""
    d = tmp_path / "kernels" / "slowmax"
    d.mkdir(parents=True)
    for f in ("reference.py", "kernel.py"):
        shutil.copy(ROOT / "kernels" / "softmax" / f, d / f)
    toml = (ROOT / "kernels" / "softmax" / "task.toml").read_text().replace('name = "softmax"', 'name = "slowmax"', 1)
    (d / "task.toml").write_text(extra_toml + "\n" + toml)
    return d


def test_task_limits_default_and_are_read(tmp_path):
    t = load_task("softmax")
    assert (t.call_timeout_for(True), t.call_timeout_for(False)) == (DEFAULT_CALL_TIMEOUT_S,
                                                                     DEFAULT_INTERPRETER_CALL_TIMEOUT_S)
    d = _task_with(tmp_path, "call_timeout_s = 30\ninterpreter_call_timeout_s = 4.5")
    t = load_task(d)
    assert (t.call_timeout_for(True), t.call_timeout_for(False)) == (30.0, 4.5)


@pytest.mark.parametrize("value", ["0", "-3", '"soon"', "true"])
def test_a_bad_limit_names_the_file_and_key(tmp_path, value):
    d = _task_with(tmp_path, f"call_timeout_s = {value}")
    with pytest.raises(TaskError) as e:
        load_task(d)
    assert str(e.value).startswith(f"{d / 'task.toml'}: call_timeout_s: ")


def test_eval_of_a_hang_costs_at_most_the_tasks_limit(tmp_path, monkeypatch, capsys):
    d = _task_with(tmp_path, "interpreter_call_timeout_s = 3")
    monkeypatch.chdir(tmp_path)
    rc = main(["eval", str(d), str(HANG), "--cpu", "--json"])
    v = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert v["reasons"][0]["rule"] == "timeout" and "no answer within 3 s" in v["reasons"][0]["message"]
    assert v["call_timeout_s"] == 3.0
    # the hanging call was killed at its limit, not after the default 300 s (slack for a loaded machine)
    assert v["phases_s"].get("correctness", 0) < 3 + 20, v["phases_s"]


def test_eval_timeout_flag_overrides_the_task(tmp_path, monkeypatch, capsys):
    d = _task_with(tmp_path, "interpreter_call_timeout_s = 500")
    monkeypatch.chdir(tmp_path)
    assert main(["eval", str(d), str(HANG), "--cpu", "--json", "--timeout", "2"]) == 1
    assert "no answer within 2 s" in capsys.readouterr().out


@pytest.mark.parametrize("cmd", ["run", "eval"])
@pytest.mark.parametrize("value", ["0", "-1", "nan"])
def test_timeout_flag_out_of_range_is_refused_alike(tmp_path, monkeypatch, capsys, cmd, value):
    monkeypatch.chdir(tmp_path)
    args = ["run", "softmax", "--headless", "--auto"] if cmd == "run" else ["eval", "softmax", str(HANG)]
    assert main([*args, "--timeout", value]) == 2
    err = capsys.readouterr().err
    assert f"--timeout {value}: must be a number of seconds above 0" in err
    assert not (tmp_path / ".warpsmith").exists()


def test_run_with_a_hanging_candidate_shows_the_limit_and_waits_no_longer(tmp_path, monkeypatch, capsys):
    agent = tmp_path / "agent"
    agent.mkdir()
    shutil.copy(HANG, agent / "01_hang.py")
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "softmax", "--headless", "--auto", "--quiet", "--iterations", "1",
               "--agent", f"script:{agent}", "--timeout", "3"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "evaluating (local; a call may take up to 3 s)" in out
    session = next((tmp_path / ".warpsmith" / "sessions").iterdir())
    started = [r for r in Journal(session / "journal.jsonl").read() if r.get("kind") == "EvalStarted"]
    assert started and started[0]["call_timeout_s"] == 3.0
    verdicts = [r for r in Journal(session / "journal.jsonl").read() if r.get("kind") == "EvalResult"]
    assert verdicts[0]["verdict"]["reasons"][0]["rule"] == "timeout"
    assert verdicts[0]["verdict"]["phases_s"].get("correctness", 0) < 3 + 20


def test_the_tui_shows_the_limit_while_a_candidate_runs():
    from harness import events as ev
    from tui.state import RunState
    from tui.widgets.bench import verdict_head
    from tui.widgets.status import status_text

    state = RunState()
    state.apply(ev.IterationStarted(1))
    state.apply(ev.EvalStarted(1, call_timeout_s=45))
    assert "evaluating ≤45s/call" in status_text(state).plain
    assert verdict_head(state).plain == "evaluating #1: a call may take up to 45 s"

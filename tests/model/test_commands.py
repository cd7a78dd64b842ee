"""The commands: `sessions export` writes the dispatcher, `e2e` stacks two sessions' kernels."""
from __future__ import annotations

from warpsmith.cli import main
from harness.model.dispatch import keep_for_buckets
from harness.sessions.session import Session
from harness.authoring.tasks import load_task

from model_helpers import ONEPASS, bucketed_softmax, partial_win


def test_sessions_export_writes_a_dispatcher(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # a project-local task with buckets: ./kernels/softmax shadows the built-in one
    (tmp_path / "kernels").mkdir()
    bucketed_softmax(tmp_path / "kernels").rename(tmp_path / "kernels" / "softmax")
    task = load_task("softmax")
    assert task.root == tmp_path / "kernels" / "softmax" and task.buckets
    s = Session.create("softmax", "script", task.baseline_path.read_text())
    c = s.workspace.commit_candidate(ONEPASS.read_text(), 1, "one pass")
    keep_for_buckets(s, 1, c, ["short rows"], task, partial_win())
    assert main(["sessions", "export", s.id, "-o", "disp.py"]) == 0
    out = capsys.readouterr().out
    assert "short rows" in out and "-> iter 1" in out and "elsewhere -> default (reference:reference)" in out
    text = (tmp_path / "disp.py").read_text()
    assert text.startswith('"""warpsmith dispatcher for task \'softmax\'') and "def softmax(*args, **kwargs):" in text


def test_e2e_command_stacks_two_sessions(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    ids = []
    for name in ("softmax", "rmsnorm"):
        t = load_task(name, check_null=False)
        ids.append(Session.create(name, "script", t.baseline_path.read_text()).id)
    assert main(["e2e", *ids]) == 0
    out = capsys.readouterr().out
    # best kernel, or the dispatcher where softmax's task.toml declares buckets: either runs
    assert ("softmax: best" in out or "softmax: dispatcher" in out) and "rmsnorm: best" in out
    assert "all stacked" in out and "timing unavailable (no GPU: outputs compared only)" in out
    assert main(["e2e", ids[0], ids[0]]) == 2
    assert "two sessions of task softmax" in capsys.readouterr().err

"""`warpsmith sessions` with ids a person types: prefixes, ambiguous prefixes, unknown ids."""
from __future__ import annotations

import os

import pytest

from warpsmith.cli import main
from harness.authoring.tasks import load_task
from harness.wiring import RunConfig, start_session


def test_ambiguous_prefix_is_named_as_such(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    task = load_task("softmax", check_null=False)
    a = start_session(task, RunConfig(), base=tmp_path)
    b = start_session(task, RunConfig(), base=tmp_path)
    common = os.path.commonprefix([a.id, b.id])
    assert common
    assert main(["sessions", "show", common]) == 2
    err = capsys.readouterr().err
    assert "ambiguous" in err and a.id in err and b.id in err
    assert main(["sessions", "show", a.id]) == 0
    assert main(["sessions", "show", "zzz-nope"]) == 2
    assert "no session 'zzz-nope'" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["sessions", "show"], ["sessions", "resume", "--headless", "--auto"],
                                     ["sessions", "export", "-o", "out.py"], ["report", "-o", "r.md"]])
def test_every_command_taking_a_session_id_refuses_an_ambiguous_prefix(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    task = load_task("softmax", check_null=False)
    a = start_session(task, RunConfig(), base=tmp_path)
    b = start_session(task, RunConfig(), base=tmp_path)
    common = os.path.commonprefix([a.id, b.id])
    assert main([*command, common]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{common!r} is ambiguous" in err and a.id in err and b.id in err
    assert not (tmp_path / "out.py").exists() and not (tmp_path / "r.md").exists()



def test_export_of_a_session_that_kept_nothing_says_it_wrote_the_baseline(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    task = load_task("softmax", check_null=False)
    s = start_session(task, RunConfig(), base=tmp_path)
    s.workspace.commit_candidate("BLOCK = 2\n", 1, "reverted: never kept")
    assert main(["sessions", "export", s.id, "-o", "out.py"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == (f"nothing was kept in this session: wrote the baseline "
                           f"(commit {s.workspace.baseline[:10]}) to out.py")
    assert (tmp_path / "out.py").read_text() == task.baseline_path.read_text()


def test_export_after_a_keep_writes_the_kept_kernel_without_the_baseline_notice(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    s = start_session(load_task("softmax", check_null=False), RunConfig(), base=tmp_path)
    c = s.workspace.commit_candidate("BLOCK = 2\n", 1, "kept")
    s.workspace.keep(c, 1)
    assert main(["sessions", "export", s.id, "-o", "out.py"]) == 0
    assert "nothing was kept" not in capsys.readouterr().out
    assert (tmp_path / "out.py").read_text() == "BLOCK = 2\n"

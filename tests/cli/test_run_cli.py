"""`warpsmith run` / `sessions resume`: mistakes are refused before a session folder exists."""
from __future__ import annotations

import shutil
from pathlib import Path

from warpsmith.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]


def _no_session(tmp_path: Path) -> bool:
    d = tmp_path / ".warpsmith" / "sessions"
    return not d.exists() or not any(d.iterdir())


def test_script_agent_with_missing_folder_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "softmax", "--headless", "--auto", "--agent", f"script:{tmp_path / 'nope'}"])
    assert rc == 2
    assert "no such folder" in capsys.readouterr().err
    assert _no_session(tmp_path)


def test_script_agent_with_empty_folder_is_refused(tmp_path, monkeypatch, capsys):
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["run", "softmax", "--headless", "--auto", "--agent", "script:empty"]) == 2
    assert "no .py files" in capsys.readouterr().err
    assert _no_session(tmp_path)


def test_iterations_below_one_is_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["run", "softmax", "--headless", "--auto", "--iterations", "0"]) == 2
    assert "--iterations 0" in capsys.readouterr().err
    assert _no_session(tmp_path)


def test_baseline_without_the_entry_is_refused_naming_both_files(tmp_path, monkeypatch, capsys):
    task = tmp_path / "kernels" / "mytask"
    task.mkdir(parents=True)
    for f in ("reference.py", "kernel.py"):
        shutil.copy(ROOT / "kernels" / "softmax" / f, task / f)
    toml = (ROOT / "kernels" / "softmax" / "task.toml").read_text()
    toml = toml.replace('name = "softmax"', 'name = "mytask"', 1).replace('entry = "softmax"', 'entry = "mysoftmax"', 1)
    assert 'entry = "mysoftmax"' in toml
    (task / "task.toml").write_text(toml)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "mytask", "--headless", "--auto", "--iterations", "1"]) == 2
    err = capsys.readouterr().err
    assert "kernel.py" in err and "def mysoftmax" in err and "task.toml" in err
    assert _no_session(tmp_path)


def test_resume_takes_quiet():
    args = build_parser().parse_args(["sessions", "resume", "some-id", "--headless", "--quiet"])
    assert args.quiet is True
    assert build_parser().parse_args(["sessions", "resume", "some-id"]).quiet is None


def test_bad_eval_backend_and_unknown_pack_leave_no_session(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    for extra, words in ((["--eval", "bogus"], "--eval 'bogus'"), (["--eval", "pool:0"], "pool[:N]"),
                         (["--packs", "nosuch"], "no pack 'nosuch'"), (["--no-packs", "nosuch"], "--no-packs")):
        assert main(["run", "softmax", "--headless", "--auto", "--iterations", "1", *extra]) == 2
        assert words in capsys.readouterr().err
    assert _no_session(tmp_path)


def test_headless_without_auto_on_a_closed_stdin_warns(tmp_path, monkeypatch, capsys):
    import io
    import sys

    from warpsmith.commands.run import run_headless

    class Boom(Exception):
        pass

    def no_loop(*a, **k):  # stop right after the warning: this test is about the warning only
        raise Boom

    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    monkeypatch.setattr("harness.wiring.build_loop", no_loop)
    from harness.wiring import RunConfig
    try:
        run_headless(None, None, RunConfig(auto=False))
    except Boom:
        pass
    assert "--auto for an unattended run" in capsys.readouterr().err

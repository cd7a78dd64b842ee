"""`warpsmith tasks show` with something a person typed that is not a task: one line, exit 2."""
from __future__ import annotations

from harness.cli import main


def _show(capsys, arg: str) -> tuple[int, str]:
    rc = main(["tasks", "show", arg])
    out, err = capsys.readouterr()
    assert not out and "Traceback" not in err and err.count("\n") == 1, err
    return rc, err


def test_a_folder_without_task_toml_is_named_with_what_it_lacks(tmp_path, capsys):
    rc, err = _show(capsys, str(tmp_path))
    assert rc == 2
    assert err.startswith(f"warpsmith: {tmp_path}: ") and "no task.toml" in err


def test_an_unknown_task_name_lists_the_known_ones(capsys):
    rc, err = _show(capsys, "nonexistent")
    assert rc == 2
    assert "nonexistent: no such task" in err and "softmax" in err


def test_a_path_that_does_not_exist_is_called_a_missing_folder(tmp_path, capsys):
    rc, err = _show(capsys, str(tmp_path / "nope"))
    assert rc == 2
    assert f"{tmp_path / 'nope'}: no such task folder" in err


def test_a_file_is_not_taken_for_a_task(tmp_path, capsys):
    (tmp_path / "kernel.py").write_text("def softmax(x):\n    return x\n")
    rc, err = _show(capsys, str(tmp_path / "kernel.py"))
    assert rc == 2
    assert "kernel.py: not a task" in err and "task.toml" in err

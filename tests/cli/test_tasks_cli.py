"""`warpsmith tasks show`: a task's input contract in words, and something a person typed that is not a task: one line, exit 2."""
from __future__ import annotations

import shutil

from harness.cli import main
from harness.tasks import find_task_dir


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


def test_show_says_what_the_input_contract_allows(capsys):
    assert main(["tasks", "show", "softmax"]) == 0
    out = capsys.readouterr().out
    assert "contract: outputs judged per element and per row (row_rtol 0.01); invariants rows-sum-to-1" in out
    assert "x: bfloat16; layouts contiguous, row-strided, transposed; masks -inf scattered, -inf leading" in out
    assert main(["tasks", "show", "dsv4_indexer_topk"]) == 0
    out = capsys.readouterr().out
    assert "    indices:" not in out and "topk: a Python int" in out and "k_idx: bfloat16; layouts contiguous" in out


def test_show_names_the_contract_key_a_broken_task_gets_wrong(tmp_path, capsys):
    d = tmp_path / "softmax"
    shutil.copytree(find_task_dir("softmax"), d, ignore=shutil.ignore_patterns("__pycache__"))
    toml = d / "task.toml"
    toml.write_text(toml.read_text().replace('"-inf both ends", ', '"-inf in the middle", '))
    rc, err = _show(capsys, str(d))
    assert rc == 2
    assert f"{toml}: contract.inputs.x.masks: unknown '-inf in the middle'" in err

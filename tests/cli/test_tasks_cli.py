"""`warpsmith tasks show | validate`: a task's input contract in words; something a person typed that is not a task,
or a task.toml key the loader doesn't know: one line naming the file (and the line, and the key meant), exit 2."""
from __future__ import annotations

import shutil

import pytest

from warpsmith.cli import main
from harness.authoring.tasks import find_task_dir
from harness.authoring.tomlkeys import line_of


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


# -- authoring mistakes (issue 38): every unknown key named with its line and the key meant ----------

def _softmax_copy(tmp_path, *edits: tuple[str, str]):
    d = tmp_path / "softmax"
    shutil.copytree(find_task_dir("softmax"), d, ignore=shutil.ignore_patterns("__pycache__"))
    toml = d / "task.toml"
    text = toml.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new, 1)
    toml.write_text(text)
    return d, toml


def _line(toml, fragment: str) -> int:
    return toml.read_text().splitlines().index(fragment) + 1


@pytest.mark.parametrize("old, new, words", [
    # a misspelt [[shapes]] was accepted and its shape never timed; dtype for dtypes was ignored
    ('[[shapes]]\nname = "vocab 32k"', '[[shape]]\nname = "vocab 32k"', "[[shape]]: unknown table (did you mean [[shapes]]?)"),
    ('dtypes = ["bfloat16"]', 'dtype = ["bfloat16"]', "dtype: unknown key (did you mean dtypes?)"),
    ("[tolerance.bfloat16]", "[tolerance.bf16]", "tolerance.bf16: unknown dtype (did you mean bfloat16?)"),
    ('dims = { rows = 2, cols = 20000 }', 'dims = { rows = 2, cols = 20000 }\ntag = ["long"]',
     "interpreter_shapes[2].tag: unknown key (did you mean tags?)"),
    ("max_shapes = 5", "max_shape = 5", "heldout.interpreter.max_shape: unknown key (did you mean max_shapes?)"),
])
def test_an_unknown_key_is_refused_by_show_eval_and_run_with_its_line_exit_2(tmp_path, capsys, old, new, words):
    d, toml = _softmax_copy(tmp_path, (old, new))
    line = _line(toml, new.splitlines()[-1] if new.startswith("dims") else new.splitlines()[0])
    kernel = str(find_task_dir("softmax") / "kernel.py")
    for argv in (["tasks", "show", str(d)], ["eval", str(d), kernel],
                 ["run", str(d), "--headless", "--auto", "--iterations", "1"]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2 and f"{toml}:{line}: {words}" in err and err.count("\n") == 1, (argv, err)
    assert main(["tasks", "validate", str(d)]) == 1
    assert capsys.readouterr().out == f"error: {toml}:{line}: {words}\n"


def test_validate_names_every_unknown_key_at_once(tmp_path, capsys):
    d, toml = _softmax_copy(tmp_path, ('dtypes = ["bfloat16"]', 'dtype = ["bfloat16"]'),
                            ('[[shapes]]\nname = "vocab 32k"', '[[shape]]\nname = "vocab 32k"'))
    assert main(["tasks", "validate", str(d)]) == 1
    out = capsys.readouterr().out.splitlines()
    dtype, shape = _line(toml, 'dtype = ["bfloat16"]'), _line(toml, "[[shape]]")
    assert out == [f"error: {toml}:{dtype}: dtype: unknown key (did you mean dtypes?)",
                   f"error: {toml}:{shape}: [[shape]]: unknown table (did you mean [[shapes]]?)"]


def test_validate_runs_every_dtype_and_warns_without_bytes_moved(tmp_path, capsys):
    d, toml = _softmax_copy(tmp_path, ('dtypes = ["bfloat16"]', 'dtypes = ["bfloat16", "float16"]'),
                            ("[tolerance.bfloat16]", "[tolerance.float16]\natol = 1e-3\nrtol = 1e-3\n\n[tolerance.bfloat16]"))
    ref = d / "reference.py"
    text = ref.read_text()
    text = text[:text.index("def bytes_moved")] + text[text.index("def flops"):]
    text = text.replace("def reference(x):\n", "def reference(x):\n    assert x.dtype != torch.float16, 'bf16 only'\n")
    ref.write_text(text)
    assert main(["tasks", "show", str(d)]) == 0  # the loader checks the first dtype only
    capsys.readouterr()
    assert main(["tasks", "validate", str(d)]) == 1
    out = capsys.readouterr().out
    assert f"error: {ref}: reference failed on interpreter shape 'short rows' in float16: AssertionError: bf16 only" in out
    assert f"warning: {ref}: no bytes_moved(dims, dtype): no roofline" in out and "ok:" not in out


def test_validate_of_a_sound_task_says_ok_and_of_no_task_exit_2(capsys):
    assert main(["tasks", "validate", "softmax"]) == 0
    assert capsys.readouterr().out.startswith("ok: softmax (triton, 4 shapes; make_inputs and reference ran on the 3 ")
    assert main(["tasks", "validate", "nonexistent"]) == 2
    assert "nonexistent: no such task" in capsys.readouterr().err


def test_a_keys_line_is_found_through_inline_tables_arrays_and_strings():
    text = '''name = "t"
summary = """a summary that mentions
[[shape]] and dims = 3 inside a string"""
variants = [
  "kernel.py",
]
"tolerance".bfloat16.atol = 1e-2
[[shapes]]
name = "a"
dims = { rows = 1 }
[[shapes]]
name = "b"
dims = { rows = 2,
         colz = 3 }
'''
    assert line_of(text, ("shapes", 1, "dims", "colz")) == 13  # inside an inline table: the line of `dims`
    assert line_of(text, ("shapes", 1)) == 11 and line_of(text, ("shapes", 0, "name")) == 9
    assert line_of(text, ("variants",)) == 4 and line_of(text, ("tolerance", "bfloat16")) == 7
    assert line_of(text, ("shape",)) is None  # only in a string

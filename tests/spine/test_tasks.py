"""Task loading: built-in tasks load, broken ones fail with one line naming file and field."""
import shutil
from pathlib import Path

import pytest
import torch

from harness.authoring.tasks import TaskError, compare, load_module, load_task

SOFTMAX = Path(__file__).resolve().parents[2] / "kernels" / "softmax"


@pytest.fixture
def task_dir(tmp_path):
    d = tmp_path / "softmax_copy"
    shutil.copytree(SOFTMAX, d)
    return d


def edit(d: Path, old: str, new: str) -> None:
    toml = d / "task.toml"
    text = toml.read_text()
    assert old in text
    toml.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_builtin_tasks_load_and_baseline_is_correct(name):
    task = load_task(name)
    ref = task.load_reference()
    kernel = load_module(task.baseline_path, f"baseline_{name}")
    assert any(s.long for s in task.shapes) and any(s.long for s in task.interpreter_shapes)
    for shape in task.interpreter_shapes:
        inputs = ref.make_inputs(shape.dims, torch.bfloat16, 7, "cpu")
        out = getattr(kernel, task.entry)(*inputs)
        assert compare(task, ref, out, ref.reference(*inputs), inputs, "bfloat16") is None


def test_softmax_has_a_128k_long_shape():
    task = load_task("softmax")
    assert any(s.long and s.dims["cols"] >= 131072 for s in task.shapes)


@pytest.mark.parametrize("old,new,field", [
    ('dsl = "triton"', 'dsl = "cobol"', "dsl"),
    ('entry = "softmax"', 'entry = "not an identifier"', "entry"),
    ('dims = { rows = 4096, cols = 4096 }', 'tags = []', "shapes[0].dims"),
    ('dims = { rows = 4096, cols = 4096 }', 'dims = { rows = -1, cols = 4096 }', "shapes[0].dims.rows"),
    ('[tolerance.bfloat16]', '[tolerance.float16]', "tolerance.bfloat16"),
    ('name = "softmax"', 'name = 3', "name"),
])
def test_broken_task_names_file_and_field(task_dir, old, new, field):
    edit(task_dir, old, new)
    with pytest.raises(TaskError) as e:
        load_task(task_dir)
    msg = str(e.value)
    assert "task.toml" in msg and field in msg and "\n" not in msg


def test_bad_toml_is_one_line_with_the_file(task_dir):
    (task_dir / "task.toml").write_text('name = "x\n')
    with pytest.raises(TaskError) as e:
        load_task(task_dir)
    assert "task.toml" in str(e.value) and "bad TOML" in str(e.value)


def test_missing_reference_is_named(task_dir):
    (task_dir / "reference.py").unlink()
    with pytest.raises(TaskError, match="reference.py"):
        load_task(task_dir)


def test_reference_without_make_inputs_is_named(task_dir):
    (task_dir / "reference.py").write_text("def reference(x):\n    return x\n")
    with pytest.raises(TaskError, match="make_inputs"):
        load_task(task_dir)


def test_kernel_without_the_entry_function_is_refused_at_load(task_dir):
    kernel = task_dir / "kernel.py"
    source = kernel.read_text().replace("def softmax(x):", "def my_softmax(x):")
    kernel.write_text("raise RuntimeError('kernel.py was imported')\n" + source)  # read, never run
    with pytest.raises(TaskError) as e:
        load_task(task_dir, check_null=False)
    msg = str(e.value)
    assert "kernel.py" in msg and "def softmax(...)" in msg and "entry" in msg and "\n" not in msg


def test_kernel_that_does_not_parse_is_refused_with_pythons_line(task_dir):
    (task_dir / "kernel.py").write_text("import torch\n\ndef softmax(x:\n    return x\n")
    with pytest.raises(TaskError) as e:
        load_task(task_dir, check_null=False)
    msg = str(e.value)
    assert "kernel.py" in msg and "not valid Python at line 3" in msg and "\n" not in msg


def test_unknown_task_lists_known_ones():
    with pytest.raises(TaskError, match="softmax"):
        load_task("no_such_task")


def without_contract(d: Path) -> None:
    """The task without its [contract] (whose per-row error and rows summing to 1 refuse a null
    output at any atol): the elementwise tolerance is then what stands between it and a pass."""
    toml = d / "task.toml"
    toml.write_text(toml.read_text().split("\n[contract]")[0])


def test_tolerance_that_zeros_pass_is_refused(task_dir):
    without_contract(task_dir)
    edit(task_dir, "atol = 2e-3", "atol = 1.0")
    with pytest.raises(TaskError, match="too loose: zeros"):
        load_task(task_dir)


def test_tolerance_that_input_copy_passes_is_refused(task_dir):
    # rtol 1e9 lets anything of the right sign through, the copy of the input included.
    without_contract(task_dir)
    edit(task_dir, "rtol = 2e-2", "rtol = 1e9")
    with pytest.raises(TaskError, match="too loose"):
        load_task(task_dir)


def test_compare_reports_first_bad_element():
    task = load_task("softmax")
    ref = task.load_reference()
    inputs = ref.make_inputs({"rows": 4, "cols": 64}, torch.bfloat16, 1, "cpu")
    expected = ref.reference(*inputs)
    out = expected.clone()
    out[2, 5] += 0.5
    msg = compare(task, ref, out, expected, inputs, "bfloat16")
    assert msg is not None and "(2, 5)" in msg and "1 of 256" in msg
    out[0, 0] = float("nan")
    assert "NaN" in compare(task, ref, out, expected, inputs, "bfloat16")


def test_shape_names_with_commas_in_them_are_read_whole():
    """--shapes is comma-separated, and the DSV4 tasks' interpreter shapes hold commas ("short,
    partial window"): `warpsmith eval dsv4_csa_decode C.py --shapes "short, partial window"` refused
    a shape it had just listed as known."""
    t = load_task("dsv4_csa_decode")
    assert t.shape_names("short, partial window") == ["short, partial window"]
    assert t.shape_names("short, partial window,long, split key axis") == ["short, partial window",
                                                                           "long, split key axis"]
    assert t.shape_names("flash 8k x128, pro 1M x4") == ["flash 8k x128", "pro 1M x4"]
    assert t.shape_names("short,nope") == ["short", "nope"]  # unknown pieces kept for the caller's message

"""`warpsmith tasks new NAME --from FILE.py:FUNC` (issue 38): a task made from a person's PyTorch function,
standing alone (a proved copy of the function), its incumbent the function itself; the README's walk-through
run exactly as written."""
from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest
import torch

from warpsmith.cli import main
from harness.prompt import build_prompt
from harness.authoring.tasks import load_module, load_task

README = Path(__file__).resolve().parents[2] / "README.md"

OPS = '''\
import torch
import torch.nn.functional as F

SCALE = 0.5
UNUSED = torch.zeros(3)


def _gate(x):
    return F.gelu(x) * SCALE * 2


def gelu_mul(x, y):
    """gelu(x) * y, a GLU MLP's gate."""
    return _gate(x) * y


def rms(x, w, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w).to(x.dtype)


def gather_rows(table, idx):
    return table[idx]


def noisy(x):
    return x + torch.rand_like(x)


def tiles(x):
    return x.reshape(-1, 16).sum(-1)


def uses_a_global_it_lacks(x):
    return x * MISSING


def example_inputs(tokens=48, hidden=80):
    x = torch.randn(tokens, hidden, dtype=torch.bfloat16)
    return x, torch.randn_like(x)
'''


@pytest.fixture
def project(tmp_path, monkeypatch):
    """An empty project folder holding ops.py, as the current folder."""
    (tmp_path / "ops.py").write_text(OPS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _new(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["tasks", "new", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_dims_come_from_example_inputs_and_the_copy_carries_what_the_function_uses(project, capsys):
    rc, out, err = _new(capsys, "glu", "--from", "ops.py:gelu_mul",
                        "--shapes", "decode:tokens=4;prefill:tokens=4096,hidden=8192")
    assert rc == 0, err
    t = load_task("glu")
    assert t.entry == "gelu_mul" and t.dtypes == ["bfloat16"] and t.dsl == "triton"
    assert [(s.name, s.dims) for s in t.shapes] == [("decode", {"tokens": 4, "hidden": 80}),
                                                    ("prefill", {"tokens": 4096, "hidden": 8192})]
    # from the first shape, small for the interpreter, then with odd sizes
    assert [(s.name, s.dims) for s in t.interpreter_shapes] == [("small", {"tokens": 4, "hidden": 80}),
                                                                ("ragged", {"tokens": 3, "hidden": 79})]
    assert t.heldout is not None and set(t.heldout.ranges) == {"tokens", "hidden"}
    views = ("contiguous", "row-strided", "transposed")  # what a PyTorch function accepts
    assert [(i.name, i.layouts) for i in t.contract.inputs] == [("x", views), ("y", views)]
    assert t.source is not None and t.source.function == "gelu_mul" and t.source.incumbent == "eager"
    assert (t.root / t.source.file).resolve() == (project / "ops.py").resolve()
    ref = t.reference_path.read_text()
    # what gelu_mul uses comes along (a helper, its constant, F); what it doesn't, doesn't
    assert "def _gate(x):" in ref and "SCALE = 0.5" in ref and "import torch.nn.functional as F" in ref
    assert "UNUSED" not in ref and "def rms" not in ref and "example_inputs" not in ref
    # kernel.py is the function itself (eager, nothing wrapped): the incumbent
    kernel = t.baseline_path.read_text()
    assert "def gelu_mul(x, y):" in kernel and "_gelu_mul_run" not in kernel
    if not torch.cuda.is_available():
        assert "incumbent    eager: no GPU here to time torch.compile against eager" in out
    assert "tasks validate glu" in out and "eval glu my_kernel.py" in out
    assert main(["tasks", "validate", "glu"]) == 0
    assert capsys.readouterr().out.startswith("ok: glu (triton, 2 shapes; make_inputs and reference ran on the 2 ")
    assert main(["tasks", "show", "glu"]) == 0
    assert "made from gelu_mul (../../ops.py); incumbent: gelu_mul run by PyTorch (eager)" in capsys.readouterr().out


def test_an_example_expression_makes_its_numbers_constants_of_the_task(project, capsys):
    rc, out, err = _new(capsys, "rms", "--from", "ops.py:rms", "--example",
                        "torch.randn(6, 40, dtype=torch.float16), torch.ones(40), 1e-5")
    assert rc == 0, err
    t = load_task("rms")
    assert [i.name for i in t.contract.inputs] == ["x", "w"] and t.dtypes == ["float16"]
    assert t.shapes[0].dims == {"x_0": 6, "x_1": 40}  # w's one axis is x's second: the same size, one dim
    ref = load_module(t.reference_path, "test_rms_ref")
    assert ref._INPUTS["w"] == (("x_1",), "float32", ("normal", 1.0, 0.1))  # around a weight of ones, not ones
    assert "return rms(x, w, 1e-05)" in t.reference_path.read_text()
    kernel = load_module(t.baseline_path, "test_rms_kernel")
    xs = ref.make_inputs({"x_0": 3, "x_1": 40}, torch.float16, 7, "cpu")
    assert torch.equal(kernel.rms(*xs), ref.reference(*xs))  # the incumbent computes what the reference does


def test_integers_that_index_a_dim_are_drawn_below_it_on_every_shape(project, capsys):
    rc, _, err = _new(capsys, "gather", "--from", "ops.py:gather_rows", "--example",
                      "torch.randn(100, 8), torch.randint(0, 100, (12,))")
    assert rc == 0, err
    t = load_task("gather")
    ref = load_module(t.reference_path, "test_gather_ref")
    assert ref._INPUTS["idx"] == (("idx_0",), "int64", ("index", "table_0", None))
    table, idx = ref.make_inputs({"table_0": 5, "table_1": 8, "idx_0": 50}, torch.float32, 0, "cpu")
    assert int(idx.max()) < 5 and table.shape == (5, 8)


def test_a_function_that_refuses_odd_sizes_keeps_the_shapes_and_ranges_it_runs_on(project, capsys):
    rc, out, err = _new(capsys, "tiles", "--from", "ops.py:tiles", "--example", "torch.randn(32, 64)")
    assert rc == 0, err
    t = load_task("tiles")
    assert [s.name for s in t.interpreter_shapes] == ["small"]
    assert "left out: interpreter shape 'ragged'" in out and "RuntimeError" in out
    # held-out draws combine odd sizes, which it refuses: none, said
    assert t.heldout is None and "no [heldout]: tiles failed on { x_0 = 31, x_1 = 61 }" in out
    # its output is flattened: no dim follows it, so no bytes_moved, said at once and by validate
    assert "no bytes_moved" in out
    assert main(["tasks", "validate", "tiles"]) == 0
    assert "warning: " in capsys.readouterr().out


@pytest.mark.parametrize("argv, words", [
    (["x", "--from", "ops.py:gelu_mull"], "ops.py: no module-level `def gelu_mull(...)` (did you mean gelu_mul?)"),
    (["x", "--from", "nope.py:f"], "nope.py: no such file"),
    (["x", "--from", "ops.py"], "give FILE.py:FUNC"),
    (["x", "--from", "ops.py:gelu_mul", "--shapes", "a:tokenz=3"], "--shapes 'a': no dim 'tokenz' (did you mean tokens?"),
    (["x", "--from", "ops.py:gelu_mul", "--shapes", "a:tokens=0"], "a dim's value is a positive integer"),
    (["x", "--from", "ops.py:noisy", "--example", "torch.randn(4, 4)"], "is not deterministic"),
    (["x", "--from", "ops.py:uses_a_global_it_lacks", "--example", "torch.randn(4, 4)"],
     "ops.py:34: uses_a_global_it_lacks uses 'MISSING', which ops.py doesn't define"),
    (["x", "--from", "ops.py:rms", "--example", "torch.randn(4, 4, dtype=torch.float64), torch.ones(4)"],
     "dtype 'float64'"),
    (["x", "--from", "ops.py:gelu_mul", "--variant", "nope.py"], "nope.py: no such file (--variant)"),
])
def test_a_mistake_is_one_line_and_exit_2_and_writes_nothing(project, capsys, argv, words):
    rc, out, err = _new(capsys, *argv)
    assert rc == 2 and words in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (project / "kernels").exists()


def test_an_existing_task_is_replaced_only_with_force(project, capsys):
    assert _new(capsys, "glu", "--from", "ops.py:gelu_mul")[0] == 0
    rc, _, err = _new(capsys, "glu", "--from", "ops.py:gelu_mul")
    assert rc == 2 and "already exists; pass --force" in err
    assert _new(capsys, "glu", "--from", "ops.py:gelu_mul", "--force", "--shapes", "big:tokens=512")[0] == 0
    assert load_task("glu").shapes[0].name == "big"


def test_a_module_beside_the_file_cannot_come_along(project, capsys):
    (project / "helpers.py").write_text("def double(x):\n    return 2 * x\n")
    (project / "mine.py").write_text("from helpers import double\n\n\ndef f(x):\n    return double(x)\n")
    rc, _, err = _new(capsys, "f", "--from", "mine.py:f", "--example", "torch.randn(4, 4)")
    assert rc == 2 and "mine.py:1: the function uses `helpers`, which imports only from beside mine.py" in err
    assert "helpers" not in sys.modules or "mine.py" not in str(getattr(sys.modules["helpers"], "__file__", ""))


def test_the_torch_incumbent_is_never_a_candidate_and_the_prompt_carries_the_function(project, capsys):
    assert _new(capsys, "glu", "--from", "ops.py:gelu_mul")[0] == 0
    t = load_task("glu")
    # the baseline computes with torch: the static stage refuses it as a candidate (it is timed, never checked)
    assert main(["check", "glu", str(t.baseline_path)]) == 1
    assert "torch" in capsys.readouterr().out
    prompt = build_prompt(t, t.baseline_path.read_text(), []).user
    src = prompt[prompt.index("Source of truth: the PyTorch function `gelu_mul` (from ops.py)"):]
    assert src.index('def gelu_mul(x, y):\n    """gelu(x) * y, a GLU MLP\'s gate."""\n    return _gate(x) * y') \
        < src.index("Reference implementation (reference.py")
    assert "write the first triton kernel from scratch" in prompt


def test_validate_says_when_the_function_has_changed_in_its_file(project, capsys):
    assert _new(capsys, "glu", "--from", "ops.py:gelu_mul")[0] == 0
    (project / "ops.py").write_text(OPS.replace("return _gate(x) * y", "return _gate(x) * y * 2"))
    assert main(["tasks", "validate", "glu"]) == 0
    out = capsys.readouterr().out
    assert "warning: " in out and "gelu_mul has changed since this task was made from it" in out


def test_a_starting_kernel_given_with_variant_is_what_the_tuner_searches(project, capsys):
    (project / "k.py").write_text("BLOCK = 64\n\n\ndef gelu_mul(x, y):\n    return x\n")
    rc, out, err = _new(capsys, "glu", "--from", "ops.py:gelu_mul", "--variant", "k.py")
    assert rc == 0, err
    t = load_task("glu")
    assert t.raw["variants"] == ["variants/k.py"] and (t.root / "variants" / "k.py").is_file()
    (project / "bad.py").write_text("def other(x, y):\n    return x\n")
    rc, _, err = _new(capsys, "glu2", "--from", "ops.py:gelu_mul", "--variant", "bad.py")
    assert rc == 2 and "bad.py: no module-level `def gelu_mul(...)`" in err


def test_incumbent_torch_compile_wraps_the_function(project, capsys):
    assert _new(capsys, "glu", "--from", "ops.py:gelu_mul", "--incumbent", "torch.compile")[0] == 0
    t = load_task("glu")
    kernel = t.baseline_path.read_text()
    assert "_gelu_mul_run = torch.compile(_gelu_mul_eager, dynamic=False)" in kernel
    assert "def gelu_mul(x, y):\n    return _gelu_mul_run(x, y)" in kernel and t.source.incumbent == "torch.compile"



@pytest.mark.gpu
def test_on_a_gpu_auto_times_eager_against_torch_compile_and_the_kernel_runs_what_won(project, capsys):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    rc, out, err = _new(capsys, "glu", "--from", "ops.py:gelu_mul",
                        "--shapes", "decode:tokens=16,hidden=8192;prefill:tokens=8192,hidden=8192")
    assert rc == 0, err
    why = re.search(r"incumbent +(eager|torch\.compile): the faster on (.+?) \(CUDA-graph replays, median per call: "
                    r"decode ([\d.]+) us eager, ([\d.]+) us compiled; prefill ([\d.]+) us eager, ([\d.]+) us compiled; "
                    r"torch\.compile ([\d.]+)x eager's speed, geomean\)", out)
    assert why, out
    pick, device = why[1], why[2]
    assert device == torch.cuda.get_device_name(0)
    # prefill moves 3 x 8192 x 8192 bf16 (384 MiB): neither form can beat the copy bandwidth's time
    assert all(float(why[i]) > 50 for i in (5, 6)), out
    t = load_task("glu")
    assert t.source.incumbent == pick
    assert ("torch.compile(_gelu_mul_eager" in t.baseline_path.read_text()) == (pick == "torch.compile")
    assert main(["tasks", "validate", "glu"]) == 0, capsys.readouterr()


# -- the README's walk-through, exactly as written ----------------------------------------------------

def readme_walk_through() -> tuple[dict[str, str], list[str]]:
    """The files (each ```python block, named by the last `NAME.py` on the line before it) and the
    `warpsmith ...` command lines of README's "Bring your own kernel"."""
    text = README.read_text()
    section = text[text.index("## Bring your own kernel"):]
    section = section[:section.index("\n## ", 1)]
    files, commands = {}, []
    for lead, lang, body in re.findall(r"([^\n]*)\n\n```(python)?\n(.*?)```", section, re.S):
        if lang:
            files[re.findall(r"`([\w.]+\.py)`", lead)[-1]] = body
        else:
            commands += [line for line in body.splitlines() if line.startswith("warpsmith ")]
    return files, commands


def test_the_readme_walk_through_runs_as_written(tmp_path, monkeypatch, capsys):
    files, commands = readme_walk_through()
    assert set(files) == {"ops.py", "gelu_mul_triton.py"} and len(commands) == 4
    monkeypatch.chdir(tmp_path)
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    for line in commands:
        assert main(shlex.split(line)[1:]) == 0, line
    out = capsys.readouterr().out
    assert "wrote kernels/gelu_mul" in out and "ok: gelu_mul" in out
    assert "gelu_mul: ACCEPTED" in out
    assert "tuner: nothing to tune: the incumbent is gelu_mul run by PyTorch (eager)" in out

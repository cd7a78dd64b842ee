"""Held-out shapes and hard inputs (issue 25, issue 17 class 4): what is drawn, what the task format
accepts, and what a verdict says about them. The red-team candidates that they reject are in
tests/redteam (fitted_*, no_max_shift, rmsnorm_*, dsv4_hca_full_window) and test_redteam_heldout.py."""
from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from harness.authoring.contract import Contract
from harness.evaluate import EvalOptions, evaluate
from harness.evaluate.heldout import draw_shapes, hard_case_shapes, shape_bytes
from harness.authoring.tasks import TaskError, Tolerance, check_null_outputs_fail, hard_cases, load_task

REPO = Path(__file__).resolve().parents[2]
TASKS = ["softmax", "rmsnorm", "dsv4_indexer_topk", "dsv4_csa_decode", "dsv4_hca_decode", "dsv4_compress",
         "dsv4_csa_decode_fp8"]


@pytest.mark.parametrize("name", TASKS)
def test_every_builtin_task_declares_ranges_and_hard_cases(name):
    t = load_task(name)  # runs the null-output and hard-case checks
    assert t.heldout is not None and t.heldout.ranges and t.heldout.interpreter
    assert len(hard_cases(t.load_reference())) >= 2
    assert all(s.protected for s in t.shapes if s.long)


def _draws(task, on_gpu, secret):
    return draw_shapes(task, task.load_reference(), on_gpu, secret)


@pytest.mark.parametrize("on_gpu", [True, False])
def test_softmax_draws_break_the_tiling_assumptions_and_are_never_listed(on_gpu):
    t = load_task("softmax")
    ref = t.load_reference()
    listed = {tuple(sorted(s.dims.items())) for s in t.shapes + t.interpreter_shapes}
    lo, hi = t.heldout.ranges_for(on_gpu)["cols"]
    seen_why, seen_rows = set(), set()
    for secret in range(12):
        for s, why in _draws(t, on_gpu, secret):
            assert tuple(sorted(s.dims.items())) not in listed
            assert lo <= s.dims["cols"] <= hi and 1 <= s.dims["rows"] <= t.heldout.ranges_for(on_gpu)["rows"][1]
            assert shape_bytes(ref, t, s.dims) <= t.heldout.max_bytes_for(on_gpu)
            assert s.name.startswith("held-out ") and f"cols {s.dims['cols']}" in s.name
            seen_why |= {w.split(": ", 1)[1] for w in why.split("; ")}
            seen_rows.add(s.dims["rows"])
    for kind in ("a prime", "one past a power of two", "short bucket's lower edge", "long bucket's upper edge",
                 "inside the mid bucket"):
        assert kind in seen_why, (kind, seen_why)
    assert 1 in seen_rows  # a single row
    assert any(w.startswith("beyond every listed one") for w in seen_why)
    if not on_gpu:
        assert all(len(_draws(t, False, s)) <= t.heldout.interpreter_max_shapes for s in range(12))


def test_draws_follow_the_secret_seed():
    t = load_task("softmax")
    a, b = _draws(t, True, 7), _draws(t, True, 7)
    assert [s.dims for s, _ in a] == [s.dims for s, _ in b]
    assert [s.dims for s, _ in a] != [s.dims for s, _ in _draws(t, True, 8)]


def test_dsv4_draws_come_from_serving_decode_ranges_and_fit_the_byte_cap():
    t = load_task("dsv4_csa_decode")
    ref = t.load_reference()
    assert t.heldout.ranges["batch"] == (1, 512) and t.heldout.ranges["ctx"][1] == 1048576
    shapes = [s for secret in range(6) for s, _ in _draws(t, True, secret)]
    assert {s.dims["heads"] for s in shapes} <= {64, 128} and {s.dims["topk"] for s in shapes} <= {512, 1024}
    assert all(1 <= s.dims["min_ctx"] <= s.dims["ctx"] for s in shapes)
    # every ctx bucket is visited, and a shape over the cap is one that cannot shrink (batch 1)
    assert all(any(b.contains(s.dims) for s in shapes) for b in t.buckets)
    assert all(shape_bytes(ref, t, s.dims) <= t.heldout.max_bytes or s.dims["batch"] == 1 for s in shapes)


def test_hard_cases_run_on_every_listed_shape_on_the_gpu_and_one_each_plus_the_widest_in_the_interpreter():
    t = load_task("softmax")
    ref = t.load_reference()
    gpu = hard_case_shapes(t, ref, t.shapes, True)
    assert len(gpu) == len(hard_cases(ref)) * len(t.shapes)
    assert {s.dims["cols"] for _, s in gpu} == {s.dims["cols"] for s in t.shapes}  # the bucket dim is kept
    interp = hard_case_shapes(t, ref, t.interpreter_shapes, False)
    cases = list(hard_cases(ref))
    assert [c for c, _ in interp[:len(cases)]] == cases and all(s.dims["rows"] <= 2 for _, s in interp)
    # ...and every case on the widest row too (a sampled max passes on rows narrower than its sample)
    widest = max(s.dims["cols"] for s in t.interpreter_shapes)
    assert {c for c, s in interp if s.dims["cols"] == widest} == set(cases)
    # without buckets, the dim the held-out lengths vary (the first range) is kept as listed too
    rms = load_task("rmsnorm")
    for on_gpu, listed in ((True, rms.shapes), (False, rms.interpreter_shapes)):
        pairs = hard_case_shapes(rms, rms.load_reference(), listed, on_gpu)
        assert {s.dims["cols"] for _, s in pairs} <= {s.dims["cols"] for s in listed}


def test_softmax_hard_inputs_are_what_they_say():
    ref = load_task("softmax").load_reference()
    dims = {"rows": 16, "cols": 300}

    def x(case):
        return ref.make_inputs({**dims, "case": case}, torch.bfloat16, 3, "cpu")[0].float()

    assert x("huge values").abs().max() > 1e4
    masked = x("-inf masks")
    assert torch.isinf(masked).any() and torch.isfinite(masked).any(dim=1).all()
    const = x("constant rows")
    assert (const == const[:, :1]).all() and const.abs().max() >= 1e3
    assert ((x("one huge value") > 5e3).sum(dim=1) == 1).all()  # 1e4 is 9984 in bf16
    plain = ref.make_inputs(dims, torch.bfloat16, 3, "cpu")[0]
    assert torch.equal(plain, ref.make_inputs(dict(dims), torch.bfloat16, 3, "cpu")[0])


def test_the_tolerance_check_still_refuses_null_outputs():
    t = load_task("softmax")
    # The tolerance alone: the contract's per-row error and rows summing to 1 refuse a null output at any atol.
    loose = dataclasses.replace(t, tolerance={"bfloat16": Tolerance(1.0, 1.0)}, contract=Contract())
    with pytest.raises(TaskError, match="too loose"):
        check_null_outputs_fail(loose)


# -- the task format: one line naming the file and the field --------------------------------------

def _task_with(tmp_path, toml_extra: str = "", ref_extra: str = "", replace: tuple[str, str] | None = None):
    d = tmp_path / "softmax"
    shutil.copytree(REPO / "kernels" / "softmax", d, ignore=shutil.ignore_patterns("__pycache__"))
    text = (d / "task.toml").read_text()
    if replace:
        text = text.replace(*replace)
    (d / "task.toml").write_text(text + toml_extra)
    (d / "reference.py").write_text((d / "reference.py").read_text() + ref_extra)
    return d


@pytest.mark.parametrize("replace, field, words", [
    (("cols = [1, 262144]", "cols = [262144, 1]"), "heldout.cols", "lo 262144 is above hi 1"),
    (("cols = [1, 262144]", "cols = [1, 262144]\nheads = [1, 8]"), "heldout.heads", "unknown key (known: rows, cols"),
    (("cols = [1, 262144]", "cols = [1, \"width\"]"), "heldout.cols", "must name another dim"),
    (("cols = [1, 262144]", "cols = 5"), "heldout.cols", "must be [lo, hi]"),
    (("max_shapes = 5", "max_shapes = 0"), "heldout.interpreter.max_shapes", "positive integer"),
])
def test_a_malformed_heldout_table_is_refused_in_one_line(tmp_path, replace, field, words):
    d = _task_with(tmp_path, replace=replace)
    with pytest.raises(TaskError) as e:
        load_task(d)
    assert e.value.field == field and words in str(e.value) and "\n" not in str(e.value)
    assert str(e.value).startswith(str(d / "task.toml"))


def test_protected_must_be_a_boolean(tmp_path):
    d = _task_with(tmp_path, replace=("protected = true", "protected = \"yes\""))
    with pytest.raises(TaskError, match=r"shapes\[3\].protected: must be true or false"):
        load_task(d)


def test_a_hard_case_no_kernel_could_pass_is_refused(tmp_path):
    d = _task_with(tmp_path, ref_extra='''
HARD_CASES = {**HARD_CASES, "fully masked": "a row of -inf only"}
_make = make_inputs


def make_inputs(dims, dtype, seed, device):
    if dims.get("case") == "fully masked":
        return (torch.full((dims["rows"], dims["cols"]), float("-inf"), dtype=dtype, device=device),)
    return _make(dims, dtype, seed, device)
''')
    with pytest.raises(TaskError) as e:
        load_task(d)
    assert e.value.field == "HARD_CASES['fully masked']" and "NaN/Inf" in str(e.value)
    assert load_task(d, check_null=False).name == "softmax"  # listing tasks doesn't run references


def test_malformed_hard_cases_are_refused(tmp_path):
    d = _task_with(tmp_path, ref_extra="\nHARD_CASES = ['huge values']\n")
    with pytest.raises(TaskError, match="HARD_CASES: must be a dict"):
        load_task(d)


def test_no_heldout_table_means_no_draws(tmp_path):
    d = _task_with(tmp_path)
    text = (d / "task.toml").read_text()
    (d / "task.toml").write_text(text[:text.index("[heldout]")])  # (the tables are the file's last)
    t = load_task(d)
    assert t.heldout is None and _draws(t, True, 1) == []


# -- the verdict ------------------------------------------------------------------------------------

def test_the_baseline_passes_its_heldout_shapes_and_hard_inputs_and_the_verdict_lists_them():
    t = load_task("softmax")
    v = evaluate(t, t.baseline_path, options=EvalOptions(on_gpu=False, static=False, shapes=["short rows"], seed=5))
    assert v["accepted"], v["reasons"]
    assert v["heldout"] and all(h["correct"] and h["why"] and h["dims"] for h in v["heldout"])
    assert {h["case"] for h in v["hard_cases"]} == set(hard_cases(t.load_reference()))
    assert all(h["correct"] for h in v["hard_cases"])
    assert "heldout" in v["phases_s"] and any(n.startswith("held-out: ") for n in v["notes"])
    # the same secret draws the same shapes: a verdict's held-out shapes can be drawn again
    assert [h["dims"] for h in v["heldout"]] == [s.dims for s, _ in _draws(t, False, 5)]


def test_heldout_checks_can_be_switched_off_only_knowingly():
    t = load_task("softmax")
    v = evaluate(t, t.baseline_path, options=EvalOptions(on_gpu=False, static=False, shapes=["short rows"],
                                                           heldout=False))
    assert v["accepted"] and v["heldout"] == [] and v["hard_cases"] == []

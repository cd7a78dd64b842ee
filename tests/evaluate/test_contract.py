"""The input contract (task.toml [contract], issue 37): declared in one line per mistake, built the same
way wherever it is built, judged at the output's own scale; the repo's own kernels honour it; and the
allocator fill of a checked call tells it from a user's call by nothing fixed."""
from __future__ import annotations

import random
import re
import shutil
from pathlib import Path

import pytest
import torch

from harness.authoring.contract import apply, describe
from harness.evaluate import EvalOptions, evaluate
from harness.evaluate.correctness import drawn_fill, poison_fill, user_fill
from harness.evaluate.process import ChildProcess
from harness.authoring.tasks import TaskError, compare, list_tasks, load_module, load_task

REPO = Path(__file__).resolve().parents[2]


def task_copy(tmp_path: Path, name: str) -> Path:
    d = tmp_path / name
    shutil.copytree(REPO / "kernels" / name, d, ignore=shutil.ignore_patterns("__pycache__"))
    return d


def edit(d: Path, old: str, new: str) -> None:
    toml = d / "task.toml"
    text = toml.read_text()
    assert old in text, old
    toml.write_text(text.replace(old, new, 1))


# -- declaring it -------------------------------------------------------------------------------

def test_every_builtin_task_declares_a_contract_naming_every_argument():
    listed, errors = list_tasks()  # task.toml only (tasks list must not import torch)
    assert not errors
    for t in (load_task(t.root, check_null=False) for t in listed):
        assert t.contract.declared, f"{t.name}: no [contract] in task.toml"
        assert [i.name for i in t.contract.inputs] == list(
            __import__("inspect").signature(t.load_reference().reference).parameters), t.name
    softmax = load_task("softmax", check_null=False).contract
    assert {c.get("layout") for c in softmax.cases()} >= {"row-strided", "transposed"}
    assert {c.get("mask") for c in softmax.cases()} >= {"-inf leading", "-inf trailing", "-inf both ends",
                                                         "-inf all but one"}
    assert softmax.error == "rows" and "rows-sum-to-1" in softmax.invariants


@pytest.mark.parametrize("task,old,new,key,words", [
    ("softmax", 'layouts = ["contiguous", "row-strided", "transposed"]', 'layouts = ["contiguous", "diagonal"]',
     "contract.inputs.x.layouts", "unknown 'diagonal'"),
    ("softmax", 'layouts = ["contiguous", "row-strided", "transposed"]', 'layouts = ["row-strided"]',
     "contract.inputs.x.layouts", "must include \"contiguous\""),
    ("softmax", "[contract.inputs.x]", "[contract.inputs.logits]", "contract.inputs.logits",
     "reference() has no argument 'logits' (its arguments: x)"),
    ("softmax", "max_abs = 1e4", "min_abs = 1e-4", "contract.inputs.x.min_abs", "needs max_abs"),
    ("softmax", "rows-sum-to-1 = 1e-2", "rows-sum-to-2 = 1e-2", "contract.invariants.rows-sum-to-2",
     "unknown invariant"),
    ("softmax", 'error = "rows"', 'error = "columns"', "contract.error", "'columns'"),
    ("softmax", 'dtype = "task"', 'dtype = "int32"', "contract.inputs.x.dtype",
     "declared 'int32', make_inputs made bfloat16"),
    ("rmsnorm", "[contract.inputs.weight]", "[contract.inputs.w]", "contract.inputs.w", "no argument 'w'"),
    ("rmsnorm", 'dtype = "task"  # the norm', 'layouts = ["contiguous", "transposed"]  # the norm',
     "contract.inputs.weight.layouts", "needs 2 dims or more"),
    ("dsv4_csa_decode", 'indices = { dtype = "int32", masks = ["-1 trailing"] }', 'indices = { dtype = "int32" }\n'
     'sinks2 = { dtype = "float32" }', "contract.inputs.sinks2", "no argument 'sinks2'"),
    ("dsv4_csa_decode", 'q = { dtype = "task" }', 'q = { dtype = "task", masks = ["-1 trailing"] }',
     "contract.inputs.q.masks", "needs an integer input"),
    ("dsv4_indexer_topk", "[contract.inputs]", '[contract]\nerror = "rows"\n[contract.inputs]', "contract.error",
     "defines its own compare"),
])
def test_a_malformed_contract_is_one_line_naming_the_file_and_the_key(tmp_path, task, old, new, key, words):
    d = task_copy(tmp_path, task)
    edit(d, old, new)
    with pytest.raises(TaskError) as e:
        load_task(d)
    msg = str(e.value)
    # (a key the task.toml shouldn't have is named with its line: `task.toml:LINE: key: ...`)
    assert re.match(rf"{re.escape(str(d / 'task.toml'))}(:\d+)?: {re.escape(key)}: ", msg), msg
    assert words in msg and "\n" not in msg, msg


def test_a_contract_that_leaves_an_argument_out_is_refused(tmp_path):
    d = task_copy(tmp_path, "rmsnorm")
    text = (d / "task.toml").read_text()
    (d / "task.toml").write_text(text.split("\n[contract.inputs.weight]")[0])
    with pytest.raises(TaskError, match=r"contract.inputs: no entry for argument 'weight'"):
        load_task(d)


def test_a_task_without_a_contract_checks_contiguous_inputs_only(tmp_path):
    d = task_copy(tmp_path, "rmsnorm")
    (d / "task.toml").write_text((d / "task.toml").read_text().split("\n[contract]")[0])
    c = load_task(d).contract
    assert not c.declared and c.cases() == [] and c.error == "elements"


# -- building its cases -------------------------------------------------------------------------

def _x(rows=6, cols=300, seed=3):
    ref = load_task("softmax", check_null=False).load_reference()
    return ref.make_inputs({"rows": rows, "cols": cols}, torch.bfloat16, seed, "cpu")[0]


def test_views_hold_the_same_values_with_other_strides_and_a_plausible_rest():
    x = _x()
    strided = apply([x], {"arg": 0, "name": "x", "layout": "row-strided"}, 11)[0]
    assert strided.stride(-1) == 1 and strided.stride(-2) > x.shape[-1] and torch.equal(strided, x)
    rest = strided._base[..., x.shape[-1]:]
    assert torch.isfinite(rest.float()).all()  # another row's values, not a NaN a kernel could sniff
    t = apply([x], {"arg": 0, "name": "x", "layout": "transposed"}, 11)[0]
    assert t.stride() == (1, x.shape[0]) and torch.equal(t, x)


def test_a_case_is_built_the_same_whatever_the_global_random_state():
    x = _x()
    cases = load_task("softmax", check_null=False).contract.cases()
    torch.manual_seed(1)
    random.seed(1)
    first = [apply([x], c, 5)[0] for c in cases]
    torch.manual_seed(2)
    random.seed(2)
    again = [apply([x], c, 5)[0] for c in cases]
    for c, a, b in zip(cases, first, again):
        assert a.stride() == b.stride() and torch.equal(a.view(torch.int16), b.view(torch.int16)), describe(c)


def _finite(y):
    return torch.isfinite(y.float())


def test_masks_reach_the_ends_of_the_row_and_leave_one_entry_finite():
    x, n = _x(), 300
    case = {"arg": 0, "name": "x"}
    lead = _finite(apply([x], {**case, "mask": "-inf leading"}, 1)[0])
    assert lead[0, : n - 4].logical_not().all() and lead[:, -1].all()  # row 0: a first tile of any width all -inf
    trail = _finite(apply([x], {**case, "mask": "-inf trailing"}, 1)[0])
    assert trail[0, 4:].logical_not().all() and trail[:, 0].all()
    both = _finite(apply([x], {**case, "mask": "-inf both ends"}, 1)[0])
    assert not both[:, 0].any() and not both[:, -1].any()
    one = _finite(apply([x], {**case, "mask": "-inf all but one"}, 1)[0])
    assert (one.sum(1) == 1).all() and one[0, -1] and one[1, 0]
    for m in ("-inf scattered", "-inf leading", "-inf trailing", "-inf both ends", "-inf all but one"):
        assert _finite(apply([x], {**case, "mask": m}, 9)[0]).any(1).all(), m


def test_trailing_index_padding_keeps_its_form_and_reaches_a_whole_row():
    idx = torch.arange(40, dtype=torch.int32).reshape(4, 10)
    idx[3, 6:] = -1
    out = apply([idx], {"arg": 0, "name": "indices", "mask": "-1 trailing"}, 2)[0]
    assert (out[0] == -1).all() and (out[1, 1:] == -1).all() and out[1, 0] == idx[1, 0]
    pad = out == -1
    assert (pad.int().cummax(1).values.bool() == pad).all()  # nothing valid after a -1
    assert ((out == idx) | pad).all()


def test_rows_are_scaled_to_both_ends_of_the_declared_range():
    x = _x()
    x[2, :5] = float("-inf")
    y = apply([x], {"arg": 0, "name": "x", "values": [1e-4, 1e4]}, 4)[0].float()
    top = y.masked_fill(~torch.isfinite(y), 0).abs().amax(1)
    assert top[0] == pytest.approx(1e4, rel=1e-2) and top[1] == pytest.approx(1e-4, rel=1e-2)
    assert ((top >= 1e-4 * 0.99) & (top <= 1e4 * 1.01)).all() and torch.isneginf(y[2, :5]).all()


# -- judging at the output's own scale ---------------------------------------------------------

def _long_row():
    task = load_task("softmax", check_null=False)
    ref = task.load_reference()
    (x,) = ref.make_inputs({"rows": 2, "cols": 20000}, torch.bfloat16, 5, "cpu")
    return task, ref, x, ref.reference(x)


def test_probabilities_under_atol_dropped_pass_each_element_and_fail_the_row():
    task, ref, x, exp = _long_row()
    flushed = torch.where(exp.float() < 2e-3, 0.0, exp.float()).to(exp.dtype)
    assert flushed.float().sum(1).max() < 0.9  # most of a 20000-column row is mass under atol
    elementwise = load_task("softmax", check_null=False)
    elementwise.contract = type(task.contract)()  # judged per element only, as before the contract
    assert compare(elementwise, ref, flushed, exp, (x,), "bfloat16") is None
    msg = compare(task, ref, flushed, exp, (x,), "bfloat16")
    assert msg and "rows off at the row's own scale" in msg
    # Renormalised, the rows sum to 1 again; each row's mass is still in the wrong places.
    renormed = (flushed.float() / flushed.float().sum(1, keepdim=True)).to(exp.dtype)
    assert compare(task, ref, renormed, exp, (x,), "bfloat16")
    assert compare(task, ref, exp.clone(), exp, (x,), "bfloat16") is None


def test_a_row_that_does_not_sum_to_one_breaks_the_invariant():
    task, ref, x, exp = _long_row()
    task.contract = type(task.contract)(task.contract.inputs, "elements", None, dict(task.contract.invariants),
                                        declared=True)
    shrunk = (exp.float() * 0.985).to(exp.dtype)  # every element within rtol 2e-2 + atol
    msg = compare(task, ref, shrunk, exp, (x,), "bfloat16")
    assert msg and "rows-sum-to-1" in msg and "do not sum to 1" in msg


# -- the repo's own kernels on their whole contract -------------------------------------------

# Knobs that send rows of 1500 columns down each kernel's long-row path (the interpreter's shapes
# never get there): where the -inf leading blocks found variants/rows.py's NaN (exp(-inf - -inf)).
LONG_PATHS = {"MAX_ONEPASS": 1024, "LONG_BLOCK": 256, "BLOCK": 256, "MAX_PIECE": 512}


@pytest.mark.parametrize("name", ["softmax", "rmsnorm"])
def test_the_repos_kernels_and_variants_honour_their_task_contract_on_both_paths(name):
    task = load_task(name, check_null=False)
    ref = task.load_reference()
    files = [task.root / "kernel.py", *sorted((task.root / "variants").glob("*.py"))]
    xs = ref.make_inputs({"rows": 3, "cols": 1500}, torch.bfloat16, 1, "cpu")
    wrong = []
    for f in files:
        for long_paths in (False, True):
            mod = load_module(f, f"contract_{name}_{f.stem}_{long_paths}")
            for k, v in LONG_PATHS.items():
                if long_paths and hasattr(mod, k):
                    setattr(mod, k, v)
            for case in task.contract.cases():
                ys = apply(list(xs), case, 7)
                err = compare(task, ref, getattr(mod, task.entry)(*ys), ref.reference(*[y.clone() for y in ys]),
                              tuple(ys), "bfloat16")
                if err:
                    wrong.append(f"{f.name}{' (long path)' if long_paths else ''}, {describe(case)}: {err}")
    assert not wrong, "\n".join(wrong)


# -- poison drawn per evaluation; some checked calls on a user's kind of memory ----------------

def test_every_drawn_poison_word_makes_an_unwritten_element_show_up():
    words = set()
    for seed in range(300):
        fill = poison_fill(seed)
        assert fill["kind"] == "pattern"
        words.add(fill["word"])
        raw = torch.tensor([fill["word"]] * 2, dtype=torch.int64).to(torch.int32).view(torch.uint8)
        for dt in (torch.bfloat16, torch.float16, torch.float32):
            v = raw.view(dt).float()
            assert (~torch.isfinite(v) | (v.abs() >= 1.7e38)).all(), (hex(fill["word"]), dt)
        assert (raw.view(torch.int32) != -1).all() and (raw.view(torch.int64) != -1).all()  # never an index's -1
    assert len(words) > 250  # a word per evaluation, not a pattern a kernel could learn


def test_drawn_fills_mix_poison_with_a_users_kind_of_memory():
    poison = poison_fill(1)
    kinds = [drawn_fill(s, poison)["kind"] for s in range(400)]
    assert {k: kinds.count(k) > 60 for k in ("pattern", "values", "zeros")} == {"pattern": True, "values": True,
                                                                              "zeros": True}
    assert user_fill(3) == {"kind": "values", "seed": 3}


def test_an_evaluation_poisons_one_call_of_each_pair_and_runs_others_on_user_memory(tmp_path, monkeypatch):
    """One evaluation's requests (spied): the shape's pair is one poisoned call and one on earlier
    values; a share of the other checked calls runs unpoisoned; every contract case reaches the
    child (which builds it from the seed it is named), and passes."""
    seen: list[dict] = []
    real = ChildProcess.request

    def spy(self, req, timeout):
        if req and req.get("op") == "call":
            seen.append(req)
        return real(self, req, timeout)

    monkeypatch.setattr(ChildProcess, "request", spy)
    task = load_task(task_copy(tmp_path, "softmax"))
    v = evaluate(task, task.baseline_path, options=EvalOptions(on_gpu=False, time=False, static=False,
                                                               shapes=["short rows"], seed=5))
    assert v["accepted"], v["reasons"]
    pair = [r["fill"]["kind"] for r in seen[:2]]
    assert sorted(pair) == ["pattern", "values"] and seen[0]["seed"] == seen[1]["seed"]
    assert seen[0]["fill"] != seen[1]["fill"]
    later = [r["fill"]["kind"] for r in seen[2:] if not r.get("ghost")]
    assert "pattern" in later and {"values", "zeros"} & set(later)
    sent = [r["contract"] for r in seen if r.get("contract")]
    assert all(c in sent for c in task.contract.cases()) and len(sent) == len(v["contract"])
    assert all(e["correct"] and e["rule"].startswith("contract-") for e in v["contract"])

"""DeepSeek V4 tasks: loading (null-output check), baselines vs references in the Triton
interpreter, tolerances that admit the real kernels' precision and refuse wrong semantics."""
from __future__ import annotations

import dataclasses
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness.authoring.tasks import TaskError, Tolerance, check_null_outputs_fail, compare, load_module, load_task
from harness.model import dsv4_bench

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["dsv4_indexer_topk", "dsv4_csa_decode", "dsv4_hca_decode", "dsv4_compress", "dsv4_csa_decode_fp8"]
BF = torch.bfloat16
# The interpreter evaluates both sides of tl.where: exp(-inf - -inf) warns in numpy, is discarded.
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


def parts(name):
    t = load_task(name)  # runs check_null_outputs_fail
    return t, t.load_reference(), load_module(t.baseline_path, f"test_kernel_{name}")


@pytest.mark.parametrize("name", TASKS)
def test_task_loads_with_deepseek_pack_and_shapes(name):
    t = load_task(name)
    assert t.models == ["deepseek-v4"] and "long-context" in t.rules
    if name != "dsv4_compress":
        ctxs = {s.dims["ctx"] for s in t.shapes}
        assert {8192, 65536, 262144, 1048576} <= ctxs
        assert any(s.long and s.dims["ctx"] == 1048576 for s in t.shapes)
        assert any(s.long for s in t.interpreter_shapes)
    ref = t.load_reference()
    assert all(ref.bytes_moved(s.dims, BF) > 0 and ref.flops(s.dims) > 0 for s in t.shapes)


@pytest.mark.parametrize("name", TASKS)
def test_loose_tolerance_is_refused(name):
    t = load_task(name)
    loose = dataclasses.replace(t, tolerance={"bfloat16": Tolerance(1e3, 1e3)})
    if name == "dsv4_indexer_topk":
        # Index outputs: zeros repeat index 0, so even a huge score tolerance refuses them.
        check_null_outputs_fail(loose)
    else:
        with pytest.raises(TaskError, match="too loose"):
            check_null_outputs_fail(loose)


VSPLIT_TASKS = ["dsv4_csa_decode", "dsv4_csa_decode_fp8", "dsv4_hca_decode"]  # ship variants/vsplit.py (issue 19)


def starting_kernels():
    """(task, file) for each task's baseline and every variant its task.toml lists."""
    out = []
    for name in TASKS:
        t = load_task(name, check_null=False)
        out += [(name, rel) for rel in dict.fromkeys([t.baseline_path.name, *t.raw.get("variants", [])])]
    return out


@pytest.mark.parametrize("name,rel", starting_kernels(), ids=[f"{n}/{r}" for n, r in starting_kernels()])
def test_every_starting_kernel_matches_reference_on_interpreter_shapes(name, rel):
    """The baselines and the variants the tuner starts from (task.toml `variants`)."""
    t = load_task(name)
    ref = t.load_reference()
    fn = getattr(load_module(t.root / rel, f"test_start_{name}_{rel}"), t.entry)
    for shape in t.interpreter_shapes:
        inputs = ref.make_inputs(shape.dims, BF, 11, "cpu")
        saved = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
        out = fn(*inputs)
        assert compare(t, ref, out, ref.reference(*saved), saved, "bfloat16") is None, shape.name
        for a, b in zip(inputs, saved):  # the baseline must not write its inputs
            assert not isinstance(a, torch.Tensor) or torch.equal(a, b)


def test_starting_kernels_include_the_value_split_variants():
    assert {(name, "variants/vsplit.py") for name in VSPLIT_TASKS} <= set(starting_kernels())


@pytest.mark.parametrize("name", VSPLIT_TASKS)
def test_value_split_variant_at_every_part_count_fused_and_split(name, monkeypatch):
    """variants/vsplit.py (issue 19): 1, 2 and 4 value parts a head block, each in one launch and
    with its key axis split (the combine merges each part's own statistics; the RoPE dims are the
    last part's), on the first tokens and mask edges: the reference's output every time. Its declared
    space is what the tuner reads."""
    from harness.agents.tunespace import read_space

    t = load_task(name)
    ref = t.load_reference()
    path = t.root / "variants" / "vsplit.py"
    space = {p.name: p for p in read_space(path.read_text(), "variants/vsplit.py").params}
    assert space["VSPLIT"].declared and space["VSPLIT"].values == [1, 2, 4]
    k = load_module(path, f"test_vsplit_{name}")
    dims = dict(t.interpreter_shapes[-1].dims, case="first tokens and edges")
    inputs = ref.make_inputs(dims, BF, 3, "cpu")
    expected = ref.reference(*inputs)
    monkeypatch.setattr(k, "BLOCK_N", 16)
    monkeypatch.setattr(k, "COMBINE_SPLITS", 2)  # the combine's loop over groups of splits
    for vsplit in space["VSPLIT"].values:
        for splits in (1, 3):
            monkeypatch.setattr(k, "VSPLIT", vsplit)
            monkeypatch.setattr(k, "SPLITS", splits)
            out = getattr(k, t.entry)(*inputs)
            assert k.last_launch["grid"][0] == vsplit * -(-dims["heads"] // k.BLOCK_H)
            assert k.last_launch["fused"] == (splits == 1) and k.last_launch["splits"] == splits
            assert compare(t, ref, out, expected, inputs, "bfloat16") is None, (vsplit, splits)


def test_decode_baseline_splits_the_key_axis_at_small_batch():
    t, ref, k = parts("dsv4_hca_decode")
    inputs = ref.make_inputs(t.interpreter_shapes[-1].dims, BF, 0, "cpu")
    k.dsv4_hca_decode(*inputs)
    assert k.last_launch["splits"] > 1


@pytest.mark.parametrize("name", ["dsv4_csa_decode", "dsv4_hca_decode", "dsv4_csa_decode_fp8"])
def test_decode_baseline_agrees_at_forced_split_counts(name, monkeypatch):
    """The split counts the GPU sweep tries (SPLITS), up to one split a key block with more splits
    than the combine merges at once, and empty splits past short sequences' ends; and the
    warp-specialised key loop (WARP_SPEC): the reference's output every time."""
    t, ref, k = parts(name)
    inputs = ref.make_inputs(t.interpreter_shapes[-1].dims, BF, 5, "cpu")
    expected = ref.reference(*inputs)
    monkeypatch.setattr(k, "BLOCK_N", 16)
    monkeypatch.setattr(k, "COMBINE_SPLITS", 4)  # the combine's loop over groups of splits
    for splits, warp_spec in ((3, 0), (64, 1)):
        monkeypatch.setattr(k, "SPLITS", splits)
        monkeypatch.setattr(k, "WARP_SPEC", warp_spec)
        out = getattr(k, t.entry)(*inputs)
        assert 3 <= k.last_launch["splits"] <= splits and not k.last_launch["fused"]
        assert compare(t, ref, out, expected, inputs, "bfloat16") is None, (splits, warp_spec)
    assert k.last_launch["splits"] > k.COMBINE_SPLITS


@pytest.mark.parametrize("name", ["dsv4_csa_decode", "dsv4_hca_decode", "dsv4_csa_decode_fp8"])
def test_decode_automatic_splits_fill_the_sms_once(name):
    """SPLITS 0: batch x head blocks x splits stays within WAVES x SMs, no split under
    MIN_SPLIT_KEYS keys, one split (the fused launch) when the batch fills the SMs."""
    _, _, k = parts(name)
    assert k.SPLITS == 0
    for n_keys, programs in ((640, 128), (640, 64), (640, 4), (8320, 4), (8320, 8), (2176, 16), (1152, 256)):
        nsplit, per_split = k._num_splits(n_keys, 64, programs, 132)
        assert programs * nsplit <= max(k.WAVES * 132, programs)
        assert nsplit == 1 or per_split >= k.MIN_SPLIT_KEYS
        assert nsplit * per_split >= n_keys and (nsplit - 1) * per_split < n_keys  # every split has keys
    assert k._num_splits(640, 64, 128, 132)[0] == 1 and k._num_splits(8320, 64, 4, 132)[0] == 33


# ---- decode tolerances: the DS kernel's precision passes, wrong semantics fail ----

def _decode_variant(m, inputs, *, bf16_p=False, sink=True, window=True, derotate=True):
    q, kvw, wl, comp, sel, sinks, cos, sin = inputs
    B, H, d = q.shape
    W = kvw.shape[1]
    if sel.dtype == torch.int32 and sel.dim() == 2:      # CSA: gather the chosen entries
        rows = torch.gather(comp, 1, sel.clamp(min=0).long()[..., None].expand(-1, -1, d))
        valid_c = sel >= 0
    else:                                                 # HCA: every visible entry
        rows = comp
        valid_c = torch.arange(comp.shape[1])[None, :] < sel[:, None]
    kv = torch.cat([kvw, rows], 1).float()
    valid = torch.cat([(torch.arange(W)[None, :] < wl[:, None]) & window, valid_c], 1)
    lg = torch.einsum("bhd,btd->bht", q.float(), kv) * d ** -0.5
    lg = lg.masked_fill(~valid[:, None], float("-inf"))
    mx = torch.maximum(lg.amax(-1), sinks[None]) if sink else lg.amax(-1)
    p = torch.exp(lg - mx[..., None])
    den = p.sum(-1) + (torch.exp(sinks[None] - mx) if sink else 0)
    if bf16_p:
        p = p.to(BF).float()
    o = torch.einsum("bht,btd->bhd", p, kv) / den[..., None]
    if derotate:
        o = m.apply_rope(o, cos[:, None], sin[:, None], inverse=True)
    return o.to(BF)


@pytest.mark.parametrize("name", ["dsv4_csa_decode", "dsv4_hca_decode"])
def test_decode_tolerance_admits_bf16_p_and_refuses_wrong_semantics(name):
    t = load_task(name)
    m = t.load_reference()
    for seed in range(4):
        for shape in t.interpreter_shapes:
            inputs = m.make_inputs(shape.dims, BF, seed, "cpu")
            exp = m.reference(*inputs)
            assert compare(t, m, _decode_variant(m, inputs, bf16_p=True), exp, inputs, "bfloat16") is None
    inputs = m.make_inputs(t.interpreter_shapes[-1].dims, BF, 0, "cpu")
    exp = m.reference(*inputs)
    for wrong in (dict(sink=False), dict(window=False), dict(derotate=False)):
        assert compare(t, m, _decode_variant(m, inputs, **wrong), exp, inputs, "bfloat16") is not None, wrong


# ---- indexer compare ----

def _indexer():
    t = load_task("dsv4_indexer_topk")
    m = t.load_reference()
    inputs = m.make_inputs(t.interpreter_shapes[1].dims, BF, 4, "cpu")  # topk between lengths
    return t, m, inputs, m.reference(*inputs)


def test_indexer_compare_admits_bf16_scores_and_any_order():
    t, m, inputs, exp = _indexer()
    q, w, k, nv, topk = inputs
    sc = m.scores(q, w, k, nv).to(BF).float()   # DS scores in bf16
    idx = sc.topk(min(topk, sc.shape[1]), dim=1).indices
    keep = torch.arange(idx.shape[1])[None] < nv[:, None]
    out = torch.full_like(exp, -1)
    out[:, :idx.shape[1]] = torch.where(keep, idx, -1).to(torch.int32)
    assert compare(t, m, out, exp, inputs, "bfloat16") is None
    # Any order of the chosen set is fine.
    perm = exp.clone()
    for b in range(perm.shape[0]):
        n = int((perm[b] >= 0).sum())
        perm[b, :n] = perm[b, :n][torch.randperm(n)]
    assert compare(t, m, perm, exp, inputs, "bfloat16") is None


def test_indexer_compare_refuses_wrong_choices():
    t, m, inputs, exp = _indexer()
    q, w, k, nv, topk = inputs
    full = int(torch.argmax((nv >= topk).int()))  # a row with more visible entries than topk
    assert int(nv[full]) > topk
    short = int(torch.argmin(nv))
    cases = {}
    o = exp.clone(); o[full, 0] = o[full, 1]; cases["duplicate"] = o
    o = exp.clone(); o[full, 0] = int(nv[full]); cases["invisible"] = o
    o = exp.clone(); o[short, -1] = 0; cases["no -1 padding"] = o
    sc = m.scores(q, w, k, nv)
    worst = sc[full].masked_fill(~torch.isfinite(sc[full]), float("inf")).argsort()[:topk]
    o = exp.clone(); o[full] = worst.to(torch.int32); cases["low scores"] = o
    for label, o in cases.items():
        assert compare(t, m, o, exp, inputs, "bfloat16") is not None, label
    # Ignoring the causal limit: the invisible (garbage) rows win.
    nv_all = torch.full_like(nv, k.shape[1])
    o = m.reference(q, w, k, nv_all, topk)
    assert compare(t, m, o, exp, inputs, "bfloat16") is not None


# ---- compressor tolerance ----

def test_compress_tolerance_refuses_wrong_semantics():
    t = load_task("dsv4_compress")
    m = t.load_reference()
    kv, sc, w, c, s, ov = m.make_inputs(t.interpreter_shapes[0].dims, BF, 2, "cpu")
    exp = m.reference(kv, sc, w, c, s, ov)
    r, d = 4, w.shape[0]
    wrong = {
        "no overlap halves": m.finish((kv[:, 4:, d:] * sc[:, 4:, d:].softmax(1)).sum(1), w, c, s),
        "mean, not softmax": m.finish(torch.cat([kv[:, :r, :d], kv[:, r:, d:]], 1).mean(1), w, c, s),
        "no norm weight": m.finish(m.pool(kv, sc, ov), torch.ones_like(w), c, s),
        "RoPE at pos+1": m.finish(m.pool(kv, sc, ov), w, *m.rope_cos_sin(torch.full((kv.shape[0],), 5))),
    }
    for label, o in wrong.items():
        assert compare(t, m, o, exp, (kv, sc, w, c, s, ov), "bfloat16") is not None, label


# ---- the end-to-end step ----

def test_e2e_step_kernels_match_references_across_compression_boundaries():
    sys.path.insert(0, str(ROOT / "kernels" / "dsv4_decode_step"))
    import e2e

    kern = e2e.DecodeStep("tiny", 768, 2, "cpu", e2e.load_impl("kernel"), min_ctx=127)
    refr = e2e.clone_state(kern, e2e.load_impl("reference"))
    assert kern.pos.tolist() == [126, 703]  # the first sequence closes an HCA window at step 2
    comp_before = kern.hca_comp.clone()
    for _ in range(2):
        (ck, hk), (cr, hr) = kern.step(), refr.step()
        torch.testing.assert_close(ck.float(), cr.float(), atol=1e-2, rtol=2e-2)
        torch.testing.assert_close(hk.float(), hr.float(), atol=1e-2, rtol=2e-2)
    assert not torch.equal(kern.hca_comp[0, 0], comp_before[0, 0])  # entry 0 written at pos 127
    torch.testing.assert_close(kern.hca_comp.float(), refr.hca_comp.float(), atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(kern.csa_comp.float(), refr.csa_comp.float(), atol=2e-2, rtol=2e-2)
    assert kern.pos.tolist() == [128, 705]


def test_e2e_workload_plugs_into_harness_e2e_check():
    from harness.model.e2e import e2e_check

    t = load_task("dsv4_csa_decode", check_null=False)
    ok = e2e_check(t, t.baseline_path, t.baseline_path, device="cpu")
    assert ok["available"] and ok["correct"] and ok["accepted"]
    ref = t.load_reference()
    bad = e2e_check(t, lambda *a: ref.reference(*a) * 0.5, t.baseline_path, device="cpu")
    assert not bad["accepted"] and bad["reason"]["rule"] == "e2e-incorrect"


def _bench_script(*args: str) -> subprocess.CompletedProcess:
    """bench/dsv4.py itself: its refusals are the script's (argument checks, exit status 2)."""
    return subprocess.run([sys.executable, str(ROOT / "bench" / "dsv4.py"), *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


def test_bench_refuses_to_run_without_gpu():
    if torch.cuda.is_available():
        pytest.skip("has a GPU")
    r = _bench_script("--quick")
    assert r.returncode == 2
    assert "needs a CUDA GPU" in r.stderr


def test_bench_code_path_runs_in_the_interpreter(capsys):
    assert dsv4_bench.smoke(["dsv4_indexer_topk", "dsv4_compress"], {}) == 0
    out = capsys.readouterr().out
    assert "| indexer_topk |" in out and "| compress |" in out and "FAIL" not in out


def test_bench_times_a_kept_kernel_beside_the_baseline_and_names_a_bad_spec(capsys):
    """bench/dsv4.py --kernel TASK=FILE (issue 19's table: eager, compiled, baseline, tuner's best): a
    kept kernel is checked and timed on the same inputs, in columns of its own; a wrong one is FAIL."""
    vsplit = ROOT / "kernels" / "dsv4_hca_decode" / "variants" / "vsplit.py"
    best = dsv4_bench.load_best([f"dsv4_hca_decode={vsplit}"])
    assert dsv4_bench.smoke(["dsv4_hca_decode"], best) == 0
    out = capsys.readouterr().out
    assert "best | best % roof | best x kernel |" in out
    [row] = [line for line in out.splitlines() if line.startswith("| hca_decode |")]
    assert row.count("|") == 16 and "FAIL" not in row  # 12 columns and the 3 of the kept kernel
    r = _bench_script("--smoke", "--tasks", "dsv4_hca_decode", "--kernel", "dsv4_hca=x.py")
    assert r.returncode == 2
    assert "TASK must be one of" in r.stderr


def test_bench_a_kept_kernel_that_fails_is_a_failed_cell_not_a_lost_row(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("def dsv4_compress(*a):\n    raise RuntimeError('out of resources')\n")
    assert dsv4_bench.smoke(["dsv4_compress"], dsv4_bench.load_best([f"dsv4_compress={bad}"])) == 1
    [row] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| compress |")]
    assert "| ok | FAIL | - | - |" in row  # kernel.py's figures stand, the kept kernel's cell fails


@pytest.mark.parametrize("case", ["ties", "negative scores"])
def test_indexer_select_is_exact_with_ties_and_negative_scores(case):
    t, ref, k = parts("dsv4_indexer_topk")
    q, w, keys, nv, topk = ref.make_inputs(dict(batch=3, topk=24, ctx=400, min_ctx=20), BF, 6, "cpu")
    if case == "ties":  # 5 distinct keys repeated: the k-th score is shared by many entries
        keys = keys[:, :5].repeat(1, keys.shape[1] // 5 + 1, 1)[:, :keys.shape[1]].contiguous()
    else:               # every weight negative: every visible score <= 0
        w = -w.abs()
    inputs = (q, w, keys, nv, topk)
    out = k.dsv4_indexer_topk(*inputs)
    assert compare(t, ref, out, ref.reference(*inputs), inputs, "bfloat16") is None


@pytest.mark.parametrize("case", ["ties", "negative scores", "long"])
def test_indexer_split_select_is_exact(case, monkeypatch):
    """Small chunks force the split top-k (per-chunk candidates, then the merge) that the GPU
    shapes at 256k-1M take: same exact set, ties still in index order."""
    t, ref, k = parts("dsv4_indexer_topk")
    monkeypatch.setattr(k, "MIN_CHUNK", 64)
    monkeypatch.setattr(k, "SELECT_BLOCK", 32)
    dims = dict(batch=2, topk=128, ctx=4096, min_ctx=1500) if case == "long" else dict(batch=3, topk=24, ctx=400, min_ctx=20)
    q, w, keys, nv, topk = ref.make_inputs(dims, BF, 6, "cpu")
    if case == "ties":
        keys = keys[:, :5].repeat(1, keys.shape[1] // 5 + 1, 1)[:, :keys.shape[1]].contiguous()
    elif case == "negative scores":
        w = -w.abs()
    inputs = (q, w, keys, nv, topk)
    out = k.dsv4_indexer_topk(*inputs)
    assert k.last_launch["select_chunks"] > 1
    assert compare(t, ref, out, ref.reference(*inputs), inputs, "bfloat16") is None
    if case == "ties":  # exact tie order too: the single-chunk select gives the same indices
        monkeypatch.setattr(k, "MIN_CHUNK", 1 << 20)
        assert torch.equal(k.dsv4_indexer_topk(*inputs), out)


@pytest.mark.parametrize("name", ["dsv4_csa_decode", "dsv4_hca_decode", "dsv4_csa_decode_fp8"])
def test_decode_baseline_finishes_in_one_launch_when_the_batch_fills_the_gpu(name, monkeypatch):
    """A GPU of 2 SMs: batch x head blocks fill it, so one split and the fused epilogue (sink,
    normalisation, inverse RoPE) instead of the combine launch; same results."""
    t, ref, k = parts(name)
    monkeypatch.setattr(k, "_device", lambda device: (2, 1 << 30))
    for shape in t.interpreter_shapes[:2]:
        inputs = ref.make_inputs(shape.dims, BF, 1, "cpu")
        out = getattr(k, t.entry)(*inputs)
        assert k.last_launch["fused"] and k.last_launch["splits"] == 1
        assert compare(t, ref, out, ref.reference(*inputs), inputs, "bfloat16") is None, shape.name


@pytest.mark.parametrize("name", ["dsv4_csa_decode", "dsv4_hca_decode"])
def test_decode_baseline_reads_odd_row_strides_correctly(name):
    """The kernels tell the compiler the KV rows start on 16 bytes: a cache whose rows do not (a
    view with an odd row stride) is copied first, so the result is still the reference's."""
    t, ref, k = parts(name)
    q, kvw, wl, comp, sel, sinks, cos, sin = ref.make_inputs(t.interpreter_shapes[0].dims, BF, 2, "cpu")
    odd = torch.zeros(comp.shape[0], comp.shape[1], 513, dtype=comp.dtype)[..., :512]
    odd.copy_(comp)
    assert odd.stride(1) == 513 and k._aligned_rows(odd).stride(1) == 512
    inputs = (q, kvw, wl, odd, sel, sinks, cos, sin)
    assert compare(t, ref, getattr(k, t.entry)(*inputs), ref.reference(*inputs), inputs, "bfloat16") is None


@pytest.mark.parametrize("name", ["dsv4_csa_decode", "dsv4_csa_decode_fp8", "dsv4_hca_decode"])
def test_decode_baselines_declare_the_space_the_tuner_searches(name):
    """Issue 24: the offline tuner read these baselines' knobs off their literals (BLOCK_H up to 256 for
    64 or 128 heads, 2 or 32 warps for a 64 x 512 fp32 accumulator): tries the wrapper shrank or that
    could only spill. Their declared space keeps to the tiles seen to work and never leaves the
    accumulator more than half of a thread's registers; the defaults are in it."""
    from harness.agents.tunespace import hardware_limits, read_space

    t = load_task(name)
    space = read_space(t.baseline_path.read_text(), "kernel.py")
    declared = {p.name: list(p.values) for p in space.params}
    assert declared["BLOCK_H"] == [32, 64] and declared["NUM_WARPS"] == [4, 8]
    # HCA's BLOCK_N 64 spills on sm_90a (60-320 B a thread): left out there
    assert declared["BLOCK_N"] == ([16, 32] if name == "dsv4_hca_decode" else [16, 32, 64])
    assert declared["num_warps"] == [2, 4, 8]  # the combine's launch, no longer laddered 1-16
    limits, _, _ = hardware_limits([])
    grid = space.grid(limits)
    assert grid and all(c["BLOCK_H"] * 512 // (32 * c["NUM_WARPS"]) <= 128 for c in grid)
    assert not any(c["BLOCK_H"] == 64 and c["NUM_WARPS"] == 4 for c in grid)
    assert space.default() in grid
    # The value split's [BLOCK_H, 512 / VSPLIT] accumulator under the same bound.
    vs = read_space((t.root / "variants" / "vsplit.py").read_text(), "variants/vsplit.py")
    vgrid = vs.grid(limits)
    assert vgrid and vs.default() in vgrid
    assert all(c["BLOCK_H"] * (512 // c["VSPLIT"]) // (32 * c["NUM_WARPS"]) <= 128 for c in vgrid)
    assert not any(c["VSPLIT"] == 1 and c["BLOCK_H"] == 64 and c["NUM_WARPS"] == 4 for c in vgrid)


def test_e2e_step_with_a_winner_stacked_and_bad_kernel_specs_named():
    """kernels/dsv4_decode_step/e2e.py --kernel TASK=FILE (issue 19: the per-task winners stacked in the
    step): the value-split HCA decode in place of the baseline agrees with the references' step; a spec
    that names no task, no file or no entry is refused with what is wrong."""
    sys.path.insert(0, str(ROOT / "kernels" / "dsv4_decode_step"))
    import e2e

    vsplit = ROOT / "kernels" / "dsv4_hca_decode" / "variants" / "vsplit.py"
    winners = e2e.load_winners([f"dsv4_hca_decode={vsplit}"])
    kern = e2e.DecodeStep("tiny", 768, 2, "cpu", e2e.load_impl("kernel", winners), min_ctx=127)
    assert kern.impl.hca_decode is winners["dsv4_hca_decode"]
    worst = e2e.worst_differences(kern, {"eager": e2e.clone_state(kern, e2e.load_impl("reference"))}, 2)
    assert worst["eager"] < 2e-2
    # A stacked kernel that writes NaN is no match (max() alone would have dropped the NaN).
    nan_hca = lambda *a: winners["dsv4_hca_decode"](*a) * float("nan")  # noqa: E731
    kern = e2e.DecodeStep("tiny", 768, 2, "cpu", e2e.load_impl("kernel", {"dsv4_hca_decode": nan_hca}), min_ctx=127)
    assert e2e.worst_differences(kern, {"eager": e2e.clone_state(kern, e2e.load_impl("reference"))}, 1) \
        == {"eager": float("inf")}
    for spec, says in ((f"dsv4_nope={vsplit}", "TASK must be one of"), ("dsv4_hca_decode=/no/such.py", "no such file"),
                       (f"dsv4_csa_decode={vsplit}", "defines no function dsv4_csa_decode()")):
        with pytest.raises(ValueError, match=re.escape(says)):
            e2e.load_winners([spec])

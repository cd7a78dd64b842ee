"""A timed batch's inputs are refilled in place (harness/evaluate/child.py _refill) by a task's
fill_inputs where it has one: the parent rebuilds the checked call's inputs with make_inputs from the
same seed, so the two must agree bit for bit, and every seed must give values of its own."""
from __future__ import annotations

import pytest
import torch

from harness.authoring.tasks import filled_as_made, load_task

FILLED = ["softmax", "rmsnorm", "rmsnorm_cute", "dsv4_csa_decode", "dsv4_csa_decode_fp8", "dsv4_hca_decode",
          "dsv4_indexer_topk", "dsv4_compress"]


# Refilled only where a call reads them (FILL_READS_ONLY): the compressed cache, at the named entries.
ROWS_ONLY = ["dsv4_csa_decode", "dsv4_csa_decode_fp8"]


@pytest.mark.parametrize("name", FILLED)
def test_fill_writes_what_make_inputs_makes_for_that_seed(name):
    """Bit for bit; for a rows-only task, every other argument bit for bit and the reference's output
    over the refilled set the same bits as over a new one."""
    task = load_task(name)
    ref = task.load_reference()
    dt = getattr(torch, task.dtypes[0])
    assert bool(getattr(ref, "FILL_READS_ONLY", ())) == (name in ROWS_ONLY)
    for shape in task.interpreter_shapes:
        xs = list(ref.make_inputs(shape.dims, dt, 1, "cpu"))
        ptrs = [x.data_ptr() for x in xs if isinstance(x, torch.Tensor)]
        for seed in (2, 3):
            assert ref.fill_inputs(xs, shape.dims, seed) is True
            want = list(ref.make_inputs(shape.dims, dt, seed, "cpu"))
            assert [x.data_ptr() for x in xs if isinstance(x, torch.Tensor)] == ptrs  # in place: the graph's buffers stay where they were
            assert filled_as_made(ref, xs, want)
            if name not in ROWS_ONLY:
                assert all(torch.equal(a, b) and a.dtype == b.dtype and a.shape == b.shape if isinstance(a, torch.Tensor)
                           else a == b for a, b in zip(xs, want))
        # Fresh values per seed: the first input and the largest differ between two seeds (csa decode's
        # lengths are a fixed multiset in a seed's order, so a small batch may repeat them).
        again = ref.make_inputs(shape.dims, dt, 2, "cpu")
        big = max((i for i, x in enumerate(xs) if isinstance(x, torch.Tensor)), key=lambda i: xs[i].numel())
        assert not torch.equal(xs[0], again[0]) and not torch.equal(xs[big], again[big])


@pytest.mark.parametrize("name", ["softmax", "rmsnorm", "rmsnorm_cute"])
def test_a_hard_case_is_not_filled_and_is_made_as_before(name):
    task = load_task(name)
    ref = task.load_reference()
    dt = getattr(torch, task.dtypes[0])
    dims = {**task.interpreter_shapes[0].dims, "case": next(iter(ref.HARD_CASES))}
    xs = list(ref.make_inputs(dims, dt, 1, "cpu"))
    before = [x.clone() for x in xs]
    assert ref.fill_inputs(xs, dims, 2) is False
    assert all(torch.equal(a, b) for a, b in zip(xs, before))  # untouched: the harness makes and copies


@pytest.mark.parametrize("name", [n for n in FILLED if n.startswith("dsv4_")])
def test_dsv4_tasks_fill_their_hard_cases_too(name):
    task = load_task(name)
    ref = task.load_reference()
    for case in ref.HARD_CASES:
        dims = {**task.interpreter_shapes[0].dims, "case": case}
        xs = list(ref.make_inputs(dims, torch.bfloat16, 1, "cpu"))
        assert ref.fill_inputs(xs, dims, 4) is True
        want = ref.make_inputs(dims, torch.bfloat16, 4, "cpu")
        assert filled_as_made(ref, xs, list(want)), case


def test_csa_decode_keeps_its_cache_normalised():
    ref = load_task("dsv4_csa_decode").load_reference()
    dims = {"batch": 3, "heads": 16, "topk": 16, "ctx": 96, "min_ctx": 2}
    q, kvw, wl, comp, idx, sinks, cos, sin = ref.make_inputs({**dims, "ctx": 4096, "min_ctx": 4096}, torch.bfloat16,
                                                             3, "cpu")
    # Every entry visible at ctx 4096: unit RMS before the gain, so the rows' RMS is the gain's, ~1.08.
    rms = comp.float().pow(2).mean(-1).sqrt()
    assert 0.95 < rms.mean().item() < 1.2 and rms.std().item() < 0.1


def test_the_plain_inputs_keep_their_scale():
    """softmax: N(0, 4) rows (a few dominant entries, so the max shift matters); rmsnorm: N(0, 2) rows
    and weights in [0.5, 1.5) (away from 1, so forgetting them fails)."""
    ref = load_task("softmax").load_reference()
    (x,) = ref.make_inputs({"rows": 64, "cols": 4096}, torch.bfloat16, 5, "cpu")
    assert x.dtype == torch.bfloat16 and 3.8 < x.float().std().item() < 4.2
    ref = load_task("rmsnorm").load_reference()
    x, w = ref.make_inputs({"rows": 64, "cols": 4096}, torch.bfloat16, 5, "cpu")
    assert 1.9 < x.float().std().item() < 2.1 and 0.5 <= w.float().min().item() and w.float().max().item() <= 1.5


def test_a_fill_that_writes_other_values_is_refused_at_load(tmp_path):
    """A fill_inputs that drifted from make_inputs (here: another scale) would fail every timed output,
    the incumbent's too: the loader names it instead."""
    import shutil

    from harness.authoring.tasks import TaskError

    d = tmp_path / "softmax_copy"
    shutil.copytree(load_task("softmax").root, d)
    ref = d / "reference.py"
    text = ref.read_text()
    ref.write_text(text + "\n\ndef make_inputs(dims, dtype, seed, device):  # made apart from the fill\n"
                          "    g = torch.Generator().manual_seed(seed)\n"
                          "    return (torch.empty(dims['rows'], dims['cols'], dtype=dtype).normal_(0.0, 4.0, generator=g),)\n"
                          "\n\ndef fill_inputs(xs, dims, seed):  # whose scale drifted\n"
                          "    xs[0].normal_(0.0, 3.0, generator=torch.Generator().manual_seed(seed))\n"
                          "    return True\n")
    with pytest.raises(TaskError, match="fill_inputs.*other values"):
        load_task(d)


def _entries(comp, idx):
    """{(b, j): entry j of sequence b} for the entries idx names (bf16 rows, or FP8 bytes)."""
    return {(b, int(j)): comp[b, int(j)] for b in range(idx.shape[0]) for j in idx[b] if j >= 0}


def test_csa_refill_rewrites_every_entry_a_call_reads_with_new_values_and_nothing_else():
    """The anti-caching property with a rows-only refill: a call reads its window (rewritten whole) and
    the entries its indices name, each rewritten with this seed's values, different from what the
    buffer held; every entry no index names keeps what it held (the refill's saving)."""
    ref = load_task("dsv4_csa_decode").load_reference()
    dims = {"batch": 3, "heads": 16, "topk": 32, "ctx": 2048, "min_ctx": 600}
    old = ref.make_inputs(dims, torch.bfloat16, 1, "cpu")
    xs = [x.clone() for x in old]
    ref.fill_inputs(xs, dims, 2)
    new = ref.make_inputs(dims, torch.bfloat16, 2, "cpu")
    named = _entries(xs[3], xs[4])
    assert named and all(torch.equal(v, new[3][k]) and not torch.equal(v, old[3][k]) for k, v in named.items())
    untouched = torch.ones(xs[3].shape[:2], dtype=torch.bool)
    for b, j in named:
        untouched[b, j] = False
    assert torch.equal(xs[3][untouched], old[3][untouched])
    assert untouched.float().mean() > 0.8  # most of the cache: 32 of 150-512 entries a sequence are read
    assert not torch.equal(xs[4], old[4]) and not torch.equal(xs[0], old[0]) and not torch.equal(xs[1], old[1])


def test_csa_fp8_refill_writes_each_named_entrys_bytes_where_quantize_puts_them():
    ref = load_task("dsv4_csa_decode_fp8").load_reference()
    dims = {"batch": 2, "heads": 16, "topk": 32, "ctx": 1000, "min_ctx": 300}  # 250 entries: a part-filled last block
    old = ref.make_inputs(dims, torch.bfloat16, 1, "cpu")
    xs = [x.clone() for x in old]
    ref.fill_inputs(xs, dims, 2)
    new = ref.make_inputs(dims, torch.bfloat16, 2, "cpu")
    fresh = torch.zeros(xs[3].shape, dtype=torch.bool)  # the bytes the fill may have written
    for b in range(2):
        for j in xs[4][b][xs[4][b] >= 0].tolist():
            blk, slot = divmod(j, ref.BLOCK_SIZE)
            fresh[b, blk, slot * ref.ROW_BYTES:(slot + 1) * ref.ROW_BYTES] = True
            at = ref.BLOCK_SIZE * ref.ROW_BYTES + slot * 8
            fresh[b, blk, at:at + 8] = True
    assert torch.equal(xs[3][fresh], new[3][fresh]) and torch.equal(xs[3][~fresh], old[3][~fresh])
    assert torch.equal(ref.reference(*xs), ref.reference(*new))


def test_a_rows_only_fill_that_misses_a_read_entry_is_refused_at_load(tmp_path):
    """One index slot a sequence left out of the refill (there, the buffer holds another seed's entry):
    the reference's output over the refilled set differs, and the loader names the fill."""
    import shutil

    from harness.authoring.tasks import TaskError

    d = tmp_path / "csa_copy"
    shutil.copytree(load_task("dsv4_csa_decode").root, d)
    ref = d / "reference.py"
    ref.write_text(ref.read_text() + "\n\ndef fill_inputs(xs, dims, seed):  # the last slot forgotten\n"
                   "    skip = lambda comp, seq, entries, rows: write_entry_rows(comp, seq, entries[:, :-1], rows[:, :-1])\n"
                   "    build_inputs(dims, xs[0].dtype, seed, xs[0].device, out=xs, rows_only=True, write_rows=skip,\n"
                   "                 **_knobs(dims, seed))\n"
                   "    return True\n")
    with pytest.raises(TaskError, match="fill_inputs.*other values"):
        load_task(d)
    ref.write_text(ref.read_text() + "\nFILL_READS_ONLY = [3]\n")
    with pytest.raises(TaskError, match="FILL_READS_ONLY.*tuple"):
        load_task(d)

"""DeepSeek V4 task references against independent formulations (CPU, fp32/bf16 torch)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from harness.authoring.tasks import compare, load_module, load_task

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "kernels" / "dsv4_decode_step"))
import e2e  # noqa: E402

BF = torch.bfloat16


def ref(task: str):
    return load_module(ROOT / "kernels" / task / "reference.py", f"test_ref_{task}")


def dense_with_sink(q, rows, sink, scale):
    """Softmax over [logits, sink] (the sink as one more column), value 0 for the sink column."""
    logits = (q.float() @ rows.float().T) * scale                        # [H, T]
    full = torch.cat([logits, sink[:, None]], dim=1)
    p = torch.softmax(full, dim=1)[:, :-1]
    return p @ rows.float()


def derotate(o, cos, sin):
    """Inverse RoPE by complex numbers (independent of the references' real-pair code)."""
    z = torch.view_as_complex(o[..., -64:].float().reshape(*o.shape[:-1], 32, 2).contiguous())
    z = z * torch.polar(torch.ones_like(cos), -torch.atan2(sin, cos))
    out = o.float().clone()
    out[..., -64:] = torch.view_as_real(z).flatten(-2)
    return out


def test_csa_with_all_indices_equals_dense():
    m = ref("dsv4_csa_decode")
    dims = dict(batch=3, heads=8, ctx=160, min_ctx=5, topk=40)   # topk >= every sequence's 40 entries
    q, kvw, wl, comp, idx, sinks, cos, sin = m.build_inputs(dims, BF, 5, "cpu", all_visible_indices=True)
    out = m.reference(q, kvw, wl, comp, idx, sinks, cos, sin)
    for b in range(3):
        nv = int((idx[b] >= 0).sum())
        rows = torch.cat([kvw[b, :int(wl[b])], comp[b, :nv]])            # dense: window + every entry
        exp = derotate(dense_with_sink(q[b], rows, sinks, 512 ** -0.5), cos[b], sin[b])
        torch.testing.assert_close(out[b].float(), exp, atol=4e-3, rtol=1e-2)


def test_hca_equals_dense_over_visible_entries():
    m = ref("dsv4_hca_decode")
    dims = dict(batch=3, heads=8, ctx=1500, min_ctx=100)
    q, kvw, wl, comp, nv, sinks, cos, sin = m.make_inputs(dims, BF, 2, "cpu")
    assert int(nv.min()) == 0 < int(nv.max())  # one sequence sees no entry yet
    out = m.reference(q, kvw, wl, comp, nv, sinks, cos, sin)
    for b in range(3):
        rows = torch.cat([kvw[b, :int(wl[b])], comp[b, :int(nv[b])]])
        exp = derotate(dense_with_sink(q[b], rows, sinks, 512 ** -0.5), cos[b], sin[b])
        torch.testing.assert_close(out[b].float(), exp, atol=4e-3, rtol=1e-2)


@pytest.mark.parametrize("task,dims", [
    ("dsv4_csa_decode", dict(batch=3, heads=8, ctx=600, min_ctx=60, topk=32)),
    ("dsv4_hca_decode", dict(batch=3, heads=8, ctx=2000, min_ctx=60)),
])
def test_decode_output_unchanged_when_all_positions_shift(task, dims):
    m, t = ref(task), load_task(task, check_null=False)
    base = m.build_inputs(dims, BF, 9, "cpu")
    shifted = m.build_inputs(dims, BF, 9, "cpu", pos_shift=123457)
    assert not torch.equal(base[0], shifted[0])  # the vectors really were rotated differently
    a, b = m.reference(*base), m.reference(*shifted)
    assert compare(t, m, b, a, base, "bfloat16") is None


def test_indexer_scores_unchanged_when_positions_shift():
    m = ref("dsv4_indexer_topk")
    dims = dict(batch=2, topk=16, ctx=400, min_ctx=100)
    a, b = m.build_inputs(dims, BF, 1, "cpu"), m.build_inputs(dims, BF, 1, "cpu", pos_shift=99991)
    sa, sb = m.scores(*a[:4]), m.scores(*b[:4])
    fin = torch.isfinite(sa)
    torch.testing.assert_close(sb[fin], sa[fin], atol=2e-2, rtol=2e-2)


def test_indexer_reference_is_a_loop_of_per_head_sums():
    m = ref("dsv4_indexer_topk")
    q, w, k, nv, topk = m.make_inputs(dict(batch=3, topk=16, ctx=200, min_ctx=10), BF, 3, "cpu")
    out = m.reference(q, w, k, nv, topk)
    for b in range(3):
        n = int(nv[b])
        s = torch.zeros(n)
        for h in range(q.shape[1]):
            s += w[b, h] * torch.clamp(k[b, :n].float() @ q[b, h].float(), min=0)
        kk = min(topk, n)
        assert set(out[b, :kk].tolist()) == set(torch.topk(s, kk).indices.tolist())
        assert (out[b, kk:] == -1).all()


def prefill_entries(kv, z, ape, ratio, overlap):
    """DS `Compressor.forward` prefill branch (start_pos == 0): all complete windows at once."""
    T, C = kv.shape
    d = C // 2 if overlap else C
    n = T // ratio
    kv = kv[:n * ratio].reshape(n, ratio, C)
    sc = z[:n * ratio].reshape(n, ratio, C) + ape
    if overlap:  # overlap_transform: [prev window's first half | own window's second half]
        kv2 = torch.zeros(n, 2 * ratio, d)
        sc2 = torch.full((n, 2 * ratio, d), float("-inf"))
        kv2[:, ratio:], sc2[:, ratio:] = kv[:, :, d:], sc[:, :, d:]
        kv2[1:, :ratio], sc2[1:, :ratio] = kv[:-1, :, :d], sc[:-1, :, :d]
        kv, sc = kv2, sc2
    return (kv * sc.softmax(dim=1)).sum(dim=1)


@pytest.mark.parametrize("ratio,d", [(4, 512), (4, 128), (128, 64)])
def test_decode_state_compressor_equals_prefill_formula(ratio, d):
    m = ref("dsv4_compress")
    overlap = ratio == 4
    C = 2 * d if overlap else d
    S = 2 * ratio if overlap else ratio
    T = 3 * ratio + 1
    g = torch.Generator().manual_seed(0)
    kv, z = torch.randn(T, C, generator=g), torch.randn(T, C, generator=g) * 2
    ape = torch.randn(ratio, C, generator=g)
    w = 0.5 + torch.rand(d, generator=g)
    kv_state, sc_state = torch.zeros(1, S, C), torch.full((1, S, C), float("-inf"))
    decoded = []
    for p in range(T):  # the decode path, token by token, through e2e's state machine
        pos = torch.tensor([p])
        e2e.compressor_update(kv_state, sc_state, kv[p:p + 1], z[p:p + 1] + ape[p % ratio], pos, ratio, overlap)
        if (p + 1) % ratio == 0:
            c, s = m.rope_cos_sin(torch.tensor([p + 1 - ratio]))
            decoded.append(m.reference(kv_state, sc_state, w, c, s, overlap)[0])
            if overlap:
                e2e.compressor_shift(kv_state, sc_state, torch.tensor([True]), ratio)
    pooled = prefill_entries(kv, z, ape, ratio, overlap)
    c, s = m.rope_cos_sin(torch.arange(len(decoded)) * ratio)
    expected = m.finish(pooled, w, c, s)
    torch.testing.assert_close(torch.stack(decoded).float(), expected.float(), atol=0, rtol=0)


def test_compress_inputs_cover_entry_zero():
    m = ref("dsv4_compress")
    kv, sc, w, c, s, overlap = m.make_inputs(dict(batch=3, ratio=4, d=128), BF, 0, "cpu")
    assert overlap and torch.isinf(sc[0, :4]).all() and torch.isfinite(sc[1]).all()
    assert torch.isfinite(m.reference(kv, sc, w, c, s, overlap).float()).all()


def test_fp8_model1_layout_and_dequantisation_follow_flashmla():
    m = ref("dsv4_csa_decode_fp8")
    assert m.BYTES_PER_TOKEN == 584 and m.block_bytes(64) == 37440  # 64*584 padded to 65*576
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(1, 70, 512, generator=g) * torch.logspace(-3, 2, 70)[None, :, None]).to(BF)
    qc = m.quantize(x)
    assert qc.shape == (1, 2, 37440) and qc.dtype == torch.uint8
    j = 66                                  # block 1, slot 2
    blk, slot = qc[0, 1], 2
    row = blk[slot * 576:(slot + 1) * 576]
    assert torch.equal(row[448:].view(BF), x[0, j, 448:])             # RoPE part stored as bf16
    for t in range(7):                                                # independent per-tile formula
        tile = x[0, j, t * 64:(t + 1) * 64].float()
        s = 2.0 ** torch.ceil(torch.log2(torch.clamp(tile.abs().max() / 448, min=1e-4)))
        assert int(blk[64 * 576 + slot * 8 + t]) == int(torch.log2(s)) + 127   # ue8m0 byte
        fp8 = (tile / s).to(torch.float8_e4m3fn)
        assert torch.equal(row[t * 64:(t + 1) * 64], fp8.view(torch.uint8))
    deq = m.dequantize_entries(qc, torch.tensor([[j, -1]], dtype=torch.int32))
    exp = torch.cat([torch.cat([(x[0, j, t * 64:(t + 1) * 64].float()
                                / 2.0 ** (int(blk[64 * 576 + slot * 8 + t]) - 127)).to(torch.float8_e4m3fn).float()
                                * 2.0 ** (int(blk[64 * 576 + slot * 8 + t]) - 127) for t in range(7)]),
                     x[0, j, 448:].float()])
    assert torch.equal(deq[0, 0].float(), exp) and torch.equal(deq[0, 1], torch.zeros(512, dtype=BF))


def test_fp8_reference_is_the_bf16_task_on_the_dequantised_cache():
    m = ref("dsv4_csa_decode_fp8")
    dims = dict(batch=2, heads=8, ctx=400, min_ctx=50, topk=24)
    q, kvw, wl, comp, idx, sinks, cos, sin = m.make_inputs(dims, BF, 4, "cpu")
    n = dims["ctx"] // 4
    whole = m.dequantize_entries(comp, torch.arange(n, dtype=torch.int32)[None].expand(2, -1))
    exp = m.BF16_TASK.reference(q, kvw, wl, whole, idx, sinks, cos, sin)
    assert torch.equal(m.reference(q, kvw, wl, comp, idx, sinks, cos, sin), exp)

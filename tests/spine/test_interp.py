"""Triton's interpreter multiplies bf16 dot operands as raw bits; harness.interp fixes it."""
import torch
import triton
import triton.language as tl

from harness.interp import patch_bf16_dot


@triton.jit
def _matmul16(a, b, c, N: tl.constexpr):
    i = tl.arange(0, N)
    x = tl.load(a + i[:, None] * N + i[None, :])
    y = tl.load(b + i[:, None] * N + i[None, :])
    tl.store(c + i[:, None] * N + i[None, :], tl.dot(x, y))


def test_bf16_dot_in_the_interpreter_matches_fp32_matmul():
    assert patch_bf16_dot()
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, 16, generator=g).bfloat16()
    b = torch.randn(16, 16, generator=g).bfloat16()
    c = torch.empty(16, 16)
    _matmul16[(1,)](a, b, c, N=16)
    torch.testing.assert_close(c, a.float() @ b.float(), atol=1e-4, rtol=1e-4)


def test_the_evaluator_child_applies_the_fix_too():
    from pathlib import Path

    from harness.evaluate import EvalOptions, evaluate
    from harness.authoring.tasks import load_task

    cand = Path(__file__).parent / "data" / "bf16_dot_softmax.py"
    v = evaluate(load_task("softmax"), cand, None, EvalOptions(shapes=["short rows"]))
    assert v["accepted"], v["reasons"]

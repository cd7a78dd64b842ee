"""The launch-on-every-path analysis, alias resolution and the torch allowlist, case by case."""
from __future__ import annotations

import textwrap

import pytest

from harness.guard import check_source
from harness.guard.pyparse import build_model

HEAD = '''import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


'''
L = "_k[(1,)](x, y, x.numel(), BLOCK=1024)"


def launch_findings(body: str, task) -> list[int]:
    src = HEAD + textwrap.dedent(body).replace("LAUNCH", L)
    rules = [r for r in __import__("harness.guard", fromlist=["rules_for_task"]).rules_for_task(task)
             if r.id == "triton-launch"]
    return [v.line - HEAD.count("\n") for v in check_source(src, task, rules)]


@pytest.mark.parametrize("body, bad_lines", [
    ("def softmax(x):\n    y = torch.empty_like(x)\n    LAUNCH\n    return y\n", []),
    # Not "on every path" any more: the runtime proof (launches seen on every checked shape, output
    # wrong when they are no-ops) judges the paths; these honest shapes of code were refused before.
    ("def softmax(x):\n    y = torch.empty_like(x)\n    if x.numel() == 0:\n        return y\n    LAUNCH\n    return y\n", []),
    ("def softmax(x):\n    y = torch.empty_like(x)\n    for r in range(0, x.shape[0], 64):\n        LAUNCH\n    return y\n", []),
    ("def softmax(x):\n    y = torch.empty_like(x)\n    n = 0\n    while n < x.shape[0]:\n        LAUNCH\n"
     "        n += 1\n    return y\n", []),
    ("def _go(x, y):\n    if x.numel() > 8:\n        LAUNCH\n\n\ndef softmax(x):\n    y = torch.empty_like(x)\n"
     "    _go(x, y)\n    return y\n", []),
    ("class _L:\n    def _impl(self, x):\n        y = torch.empty_like(x)\n        LAUNCH\n        return y\n\n\n"
     "_l = _L()\n\n\ndef softmax(x):\n    return _l._impl(x)\n", []),
    # no launch at all
    ("def softmax(x):\n    y = torch.empty_like(x)\n    y.zero_()\n", [1]),
    ("def _go(x, y):\n    return _go(x, y)\n\n\ndef softmax(x):\n    y = torch.empty_like(x)\n    _go(x, y)\n    return y\n", [5]),
    # launches only in dead code
    ("def softmax(x):\n    y = torch.empty_like(x)\n    if False:\n        LAUNCH\n    return y\n", [1]),
    ("def softmax(x):\n    y = torch.empty_like(x)\n    return y\n    LAUNCH\n", [1]),
    ("DEBUG = True\n\n\ndef softmax(x):\n    y = torch.empty_like(x)\n    if DEBUG:\n        pass\n    else:\n"
     "        LAUNCH\n    return y\n", [4]),
    # constant folding: `not DEBUG` with DEBUG = False is True
    ("DEBUG = False\n\n\ndef softmax(x):\n    y = torch.empty_like(x)\n    if not DEBUG:\n        LAUNCH\n    return y\n", []),
])
def test_a_live_launch_is_reachable(body, bad_lines, softmax_task):
    assert launch_findings(body, softmax_task) == bad_lines


@pytest.mark.parametrize("src, node_text, expected", [
    ("import torch as t\nt.nn.functional.softmax\n", "t.nn.functional.softmax", {"torch.nn.functional.softmax"}),
    ("from torch.nn import functional as F\nF.gelu\n", "F.gelu", {"torch.nn.functional.gelu"}),
    ("import triton.language as L\nL.load\n", "L.load", {"triton.language.load"}),
    ("from torch import softmax as s\ns\n", "s", {"torch.softmax"}),
    ("import torch\nf = torch.exp\ng = f\ng\n", "g", {"torch.exp"}),
    ("import torch\ntorch.cuda.current_stream().synchronize\n", "torch.cuda.current_stream().synchronize",
     {"torch.cuda.current_stream().synchronize"}),
    ("import torch\ny = torch.topk(x, 2).indices\ny\n", "y", set()),  # a value, not an alias
    ("len\n", "len", {"builtins.len"}),
    ("def len(x):\n    return 0\nlen\n", "len", set()),  # shadowed builtin
])
def test_qualnames(src, node_text, expected):
    m = build_model(src)
    last = m.root.named_children[-1].named_children[0]
    assert m.text(last) == node_text
    assert set(m.qualnames(last)) == expected


@pytest.mark.parametrize("expr, ok", [
    ("torch.empty_like(x)", True), ("torch.empty(3, device=x.device, dtype=torch.bfloat16)", True),
    ("x.contiguous().view(-1)", True), ("x.stride(0) * x.shape[1]", True), ("x.new_empty(x.shape)", True),
    ("torch.cuda.get_device_properties(x.device).multi_processor_count", True),
    ("torch.exp(x)", False), ("x.sum(-1)", False), ("torch.ops.aten.add(x, x)", False),
    ("torch.compile(len)", False), ("torch.nn.functional.relu(x)", False), ("x.float().softmax(-1)", False),
    ("torch.Tensor.exp(x)", False),
])
def test_torch_allowlist(expr, ok, softmax_task):
    from harness.guard import rules_for_task

    src = HEAD + f"def softmax(x):\n    y = torch.empty_like(x)\n    z = {expr}\n    {L}\n    return y\n"
    rules = [r for r in rules_for_task(softmax_task) if r.id == "torch-compute"]
    found = check_source(src, softmax_task, rules)
    assert (not found) == ok, found


@pytest.mark.parametrize("cpp, ok", [
    ("auto y = at::empty_like(x); using acc_t = at::acc_type<float, true>; at::cuda::CUDAGuard g(x.device());", True),
    ("auto y = torch::empty({n}, x.options().dtype(torch::kFloat8_e4m3fn));", True),
    ("float lo = at::numeric_limits<float>::lower_bound();", True),
    ("return at::softmax(x, -1);", False),
    ("return torch::matmul(a, b);", False),
    ("cublasGemmEx(handle, ...);", False),
    ("auto s = x.sum(-1); return s;", False),
    ("at::globalContext().setAllowTF32CuBLAS(true);", False),
])
def test_cuda_source_allowlist(cpp, ok, task_for):
    from harness.guard import rules_for_task

    src = ('import torch\nfrom torch.utils.cpp_extension import load_inline\n\nSRC = r"""\n#include <torch/extension.h>\n'
           '__global__ void k(float* y) { y[threadIdx.x] = 0.f; }\n'
           f'torch::Tensor fwd(torch::Tensor x) {{ k<<<1, 32>>>(nullptr); {cpp} }}\n"""\n')
    task = task_for("cuda")
    rules = [r for r in rules_for_task(task) if r.id == "cuda-source-compute"]
    found = check_source(src, task, rules)
    assert (not found) == ok, found

"""The allowlist stage (harness/guard/allow.py): what it lets through and what it names, in the
spellings that got past a ban list (issue 17, classes 6 and 7) and the ones honest kernels use."""
from __future__ import annotations

import pytest

from harness.guard import check_source

HEAD = ("import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef _k(x_ptr, BLOCK: tl.constexpr):\n    tl.store(x_ptr + tl.arange(0, BLOCK), 0.0)\n\n\n")
ENTRY = "\n\ndef softmax(x):\n    y = torch.empty_like(x)\n    _k[(1,)](y, BLOCK=16)\n    return y\n"
ALLOW = {"allowed-imports", "allowed-names", "no-dunder"}


def fired(top: str, task) -> set[str]:
    return {v.rule for v in check_source(HEAD + top + ENTRY, task) if v.rule in ALLOW}


@pytest.mark.parametrize("top, rule", [
    ("_M = [torch][0]", "allowed-names"),                       # a module as a value hands over all of it
    ("_B = tl.core", "allowed-names"),                          # a submodule not on the list
    ("_O = torch._C._DisableTorchDispatch", "allowed-names"),   # private torch
    ("_N = torch._C._len_torch_function_stack", "allowed-names"),
    ("_S = torch.ops.aten.softmax", "allowed-names"),           # torch.ops of a namespace it did not register
    ("_G = getattr(torch, '_C')", "allowed-names"),             # a literal getattr reads like the attribute
    ("_T = type(torch.empty(1))", "allowed-names"),             # builtins by name
    ("exec('pass')", "allowed-names"),
    ("_V = vars()", "allowed-names"),
    ("import dataclasses\n_S = dataclasses.re", "allowed-names"),  # stdlib wildcards leave modules out
    ("import operator", "allowed-imports"),
    ("import warpsmith_incumbent", "allowed-imports"),
    ("from _signal import signal", "allowed-imports"),
    ("from triton.runtime import cache", "allowed-imports"),
    ("import triton.testing", "allowed-imports"),
    ("setattr(softmax, '__na' 'me__', 'x')", "no-dunder"),
    ("class _A:\n    def __del__(self):\n        pass", "no-dunder"),
    ("_C = softmax.__globals__", "no-dunder"),
    ("if __name__ == '__main__':\n    pass", "no-dunder"),
])
def test_refused(top, rule, softmax_task):
    assert rule in fired(top, softmax_task), top


@pytest.mark.parametrize("top", [
    "from __future__ import annotations",
    "import math\nimport functools\nimport itertools\nfrom dataclasses import dataclass, field\nfrom typing import Optional",
    "from triton.language.extra import libdevice\n_E = libdevice.exp",
    "from triton.language.extra.cuda import libdevice as ld\n_E = ld.fast_expf",
    "_SM = torch.cuda.get_device_properties(0).multi_processor_count",
    "_W = tl.float32.primitive_bitwidth",
    "import functools\n_P = functools.partial(max, 1)",
    "class _Cfg:\n    def __init__(self, b):\n        super().__init__()\n        self.b = b\n\n    def __call__(self, n):\n        return self.b",
    "@torch.library.triton_op('mine::op', mutates_args=())\ndef _op(x: torch.Tensor) -> torch.Tensor:\n"
    "    y = torch.empty_like(x)\n    torch.library.wrap_triton(_k)[(1,)](y, BLOCK=16)\n    return y\n\n\n_F = torch.ops.mine.op",
    "try:\n    from triton.language.extra import libdevice\nexcept ImportError:\n    libdevice = None",
])
def test_allowed(top, softmax_task):
    assert fired(top, softmax_task) == set(), top

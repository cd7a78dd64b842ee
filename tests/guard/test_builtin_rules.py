"""Each built-in static rule, positive (it fires) and negative (a near miss that must not fire).

A new rule in packs/rules/ without a case here fails `test_every_builtin_rule_has_cases`.
Runtime rules are performed by the evaluator (harness/evaluate); here we check they are known ids
and never reported by the static stage.
"""
from __future__ import annotations

import textwrap

import pytest

from harness.guard import RUNTIME_CHECKS, check_source
from harness.guard.rules import BUILTIN_RULES_DIR, load_rules_pack


def _indent(code: str) -> str:
    return textwrap.indent(textwrap.dedent(code).strip("\n"), "    ") + "\n" if code else ""


def tri(top: str = "", pre: str = "", post: str = "", launch: str = "_k[(1,)](x, y, x.numel(), BLOCK=1024)") -> str:
    return (
        "import torch\nimport triton\nimport triton.language as tl\n\n\n"
        "@triton.jit\ndef _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
        "    i = tl.arange(0, BLOCK)\n"
        "    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)\n\n\n"
        + textwrap.dedent(top).strip("\n") + "\n\n\n"
        "def softmax(x):\n    y = torch.empty_like(x)\n" + _indent(pre) + f"    {launch}\n" + _indent(post)
        + "    return y\n"
    )


def cute(pre: str = "", post: str = "", launch: str = "_host(from_dlpack(x), from_dlpack(y))",
         kernel_launch: str = "_kern(mX, mY).launch(grid=(1, 1, 1), block=(128, 1, 1))", top: str = "") -> str:
    return (
        "import torch\nimport cutlass.cute as cute\nfrom cutlass.cute.runtime import from_dlpack\n\n\n"
        "@cute.kernel\ndef _kern(gX: cute.Tensor, gY: cute.Tensor):\n"
        "    tidx, _, _ = cute.arch.thread_idx()\n    gY[tidx] = gX[tidx]\n\n\n"
        f"@cute.jit\ndef _host(mX: cute.Tensor, mY: cute.Tensor):\n    {kernel_launch}\n\n\n"
        + textwrap.dedent(top).strip("\n") + "\n\n\n"
        "def softmax(x):\n    y = torch.empty_like(x)\n" + _indent(pre) + f"    {launch}\n" + _indent(post)
        + "    return y\n"
    )


CUDA_KERNEL = '__global__ void k(const float* x, float* y, int n) { int i = threadIdx.x; if (i < n) y[i] = x[i]; }'


def cuda(pre: str = "", post: str = "", launch: str = "y = _ext.fwd(x)", host_body: str = "auto y = torch::empty_like(x); k<<<1, 128>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel()); return y;",
         kernel: str = CUDA_KERNEL, top: str = "") -> str:
    return (
        "import torch\nfrom torch.utils.cpp_extension import load_inline\n\n"
        f'SRC = r"""\n#include <torch/extension.h>\n{kernel}\n'
        f'torch::Tensor fwd(torch::Tensor x) {{ {host_body} }}\n"""\n'
        '_ext = load_inline(name="t", cpp_sources="torch::Tensor fwd(torch::Tensor x);", cuda_sources=SRC, functions=["fwd"])\n\n'
        + textwrap.dedent(top).strip("\n") + "\n\n\n"
        "def softmax(x):\n" + _indent(pre) + f"    {launch}\n" + _indent(post) + "    return y\n"
    )


# (pack, rule id) -> (dsl, positive source, negative source)
CASES: dict[tuple[str, str], tuple[str, str, str]] = {
    # reward-hacks
    ("reward-hacks", "no-try-fallback"): ("triton", tri(pre="try:\n    pass\nexcept Exception:\n    pass"),
                                           tri(top="try:\n    import numpy\nexcept ImportError:\n    numpy = None")),
    ("reward-hacks", "no-concurrency"): ("triton", tri(top="from os import system as _s"), tri(top="import os\n_SEP = os.sep")),
    ("reward-hacks", "no-side-streams"): ("triton", tri(pre="s = torch.cuda.Stream()"), tri(pre="s = torch.cuda.current_stream()")),
    ("reward-hacks", "no-patching"): ("triton", tri(top="import time\ntime.perf_counter = lambda: 0.0"),
                                       tri(top="class _Cfg:\n    pass\n\n\n_cfg = _Cfg()\n_cfg.block = 128")),
    ("reward-hacks", "no-introspection"): ("triton", tri(top="import inspect"), tri(top="_NAME = __name__")),
    ("reward-hacks", "no-environ"): ("triton", tri(top="import os as _o\n_F = _o.environ.get('X')"), tri(top="import os\n_SEP = os.sep")),
    ("reward-hacks", "no-io"): ("triton", tri(pre="f = open('/tmp/x', 'w')"),
                                 tri(top="class _F:\n    def open(self):\n        return 1", pre="_F().open()")),
    ("reward-hacks", "no-manual-seed"): ("triton", tri(top="from torch import manual_seed as _ms\n_ms(0)"),
                                          tri(top="import random\n_R = random.random")),
    ("reward-hacks", "no-result-cache"): ("triton", tri(top="_C = {}", post="_C[x.data_ptr()] = y"),
                                           tri(top="_C = {}", post="_C[x.dtype] = 1")),
    ("reward-hacks", "no-reference-import"): ("triton", tri(top="from reference import reference"),
                                               tri(top='_DOC = "see the reference implementation"')),
    # cuda-graphs
    ("cuda-graphs", "no-eager-switch"): ("triton", tri(top="_ARGS = dict(enforce_eager=True)"), tri(top="_ARGS = dict(eager_ok=True)")),
    ("cuda-graphs", "no-compile-config"): ("triton", tri(top="torch._dynamo.config.suppress_errors = True"),
                                            tri(pre="n = triton.cdiv(x.numel(), 1024)")),
    ("cuda-graphs", "no-host-sync"): ("triton", tri(post="torch.cuda.synchronize()"), tri(top="def _unused(t):\n    return t.item()")),
    ("cuda-graphs", "no-capture-branching"): ("triton", tri(pre="if torch.cuda.is_current_stream_capturing():\n    pass"),
                                               tri(pre="cap = torch.cuda.get_device_capability()")),
    ("cuda-graphs", "no-own-graphs"): ("triton", tri(top="_G = torch.cuda.CUDAGraph()"), tri(pre="graph = 1")),
    # long-context
    ("long-context", "no-length-cap"): ("triton", tri(pre="assert x.shape[1] <= 4096"), tri(pre="assert x.shape[1] % 16 == 0")),
    # dsl-triton
    ("dsl-triton", "entry-defined"): ("triton", tri() + "\nsoftmax = torch.softmax\n", tri()),
    ("dsl-triton", "triton-kernel"): ("triton", "import torch\n\n\ndef softmax(x):\n    return torch.empty_like(x)\n", tri()),
    ("dsl-triton", "triton-launch"): ("triton", tri(launch="if False:\n        _k[(1,)](x, y, x.numel(), BLOCK=1024)"), tri()),
    ("dsl-triton", "torch-compute"): ("triton", tri(post="y = y.exp()"), tri(post="y = y.view(-1).view(x.shape)")),
    ("dsl-triton", "foreign-call"): ("triton", tri(top="import numpy as np", pre="z = np.zeros(1)"),
                                      tri(top="import math", pre="b = math.ceil(x.shape[1] / 2)")),
    ("dsl-triton", "dynamic-lookup"): ("triton", tri(pre="f = eval('1')"), tri(pre="f = getattr(y, 'shape')")),
    ("dsl-triton", "no-module-state"): ("triton", tri(top="_CALLS = {}", pre="_CALLS['n'] = _CALLS.get('n', 0) + 1"),
                                         tri(top="_BLOCK = {}", pre="b = _BLOCK.get(x.shape[1])\nif b is None:\n"
                                             "    b = _BLOCK[x.shape[1]] = triton.next_power_of_2(x.shape[1])")),
    ("dsl-triton", "triton-no-interpreter-switch"): ("triton", tri(top="_E = 'TRITON_INTERPRET'"), tri(top="_E = 'triton rocks'")),
    ("dsl-triton", "allowed-imports"): ("triton", tri(top="import operator"),
                                         tri(top="import math\nfrom triton.language.extra import libdevice")),
    ("dsl-triton", "allowed-names"): ("triton", tri(top="_OFF = torch._C._DisableTorchDispatch"),
                                       tri(top="_SM = torch.cuda.get_device_properties(0).multi_processor_count")),
    ("dsl-triton", "no-dunder"): ("triton", tri(top="_N = getattr(torch, '__na' 'me__')"),
                                   tri(top="class _Cfg:\n    def __init__(self):\n        self.block = 128")),
    # dsl-cute
    ("dsl-cute", "allowed-imports"): ("cute", cute(top="import builtins"), cute(top="import cutlass")),
    ("dsl-cute", "allowed-names"): ("cute", cute(pre="exec('pass')"), cute(pre="n = len(x.shape)")),
    ("dsl-cute", "no-dunder"): ("cute", cute(top="_G = softmax.__globals__"), cute(top="_N = 'name'")),
    ("dsl-cute", "entry-defined"): ("cute", cute() + "\nsoftmax = torch.softmax\n", cute()),
    ("dsl-cute", "cute-kernel"): ("cute", cute(kernel_launch="_kern(mX, mY)"), cute()),
    ("dsl-cute", "cute-launch"): ("cute", cute(launch="if x.numel() < 0:\n        _host(from_dlpack(x), from_dlpack(y))"), cute()),
    ("dsl-cute", "torch-compute"): ("cute", cute(post="y = torch.exp(y)"), cute(post="y = y.reshape(x.shape)")),
    ("dsl-cute", "foreign-call"): ("cute", cute(top="import cupy", pre="cupy.zeros(1)"), cute(top="import math", pre="n = math.prod(x.shape)")),
    ("dsl-cute", "no-module-state"): ("cute", cute(top="_SEEN = []", pre="_SEEN.append(len(_SEEN))"),
                                       cute(top="_FN = {}", pre="fn = _FN.get(x.dtype)\nif fn is None:\n"
                                            "    fn = _FN[x.dtype] = cute.compile(_host, from_dlpack(x), from_dlpack(y))")),
    ("dsl-cute", "dynamic-lookup"): ("cute", cute(pre="g = globals()"), cute(pre="g = getattr(x, 'dtype')")),
    # dsl-cuda
    ("dsl-cuda", "allowed-imports"): ("cuda", cuda(top="import ctypes"), cuda(top="import functools")),
    ("dsl-cuda", "allowed-names"): ("cuda", cuda(top="_M = [torch][0]"), cuda(top="_D = torch.float32")),
    ("dsl-cuda", "no-dunder"): ("cuda", cuda(top="if __name__ == '__main__':\n    pass"), cuda(top="_N = '__main__'")),
    ("dsl-cuda", "entry-defined"): ("cuda", cuda() + "\nsoftmax = torch.softmax\n", cuda()),
    ("dsl-cuda", "cuda-kernel"): ("cuda", cuda(kernel="// no kernel here", host_body="return x.clone();"), cuda()),
    ("dsl-cuda", "cuda-launch"): ("cuda", cuda(launch="y = torch.empty_like(x)"), cuda()),
    ("dsl-cuda", "cuda-source-compute"): ("cuda", cuda(host_body="k<<<1, 1>>>(nullptr, nullptr, 0); return at::relu(x);"),
                                           cuda(host_body="auto y = at::empty_like(x); k<<<1, 1>>>(nullptr, nullptr, 0); return y;")),
    ("dsl-cuda", "torch-compute"): ("cuda", cuda(post="y = torch.relu(y)"), cuda(post="y = y.contiguous()")),
    ("dsl-cuda", "foreign-call"): ("cuda", cuda(top="import numpy", pre="numpy.zeros(1)"), cuda(top="import math", pre="n = math.prod(x.shape)")),
    ("dsl-cuda", "no-module-state"): ("cuda", cuda(top="_N = 0", pre="global _N\n_N += 1"),
                                       cuda(top="_LAST = {}", post="_LAST.update(shape=tuple(x.shape))")),
    ("dsl-cuda", "dynamic-lookup"): ("cuda", cuda(pre="exec('pass')"), cuda(pre="d = getattr(x, 'device')")),
}


def _builtin_rules():
    out = []
    for pack_dir in sorted(BUILTIN_RULES_DIR.iterdir()):
        if (pack_dir / "pack.toml").is_file():
            out += load_rules_pack(pack_dir)
    return out


BUILTIN = _builtin_rules()
STATIC = [r for r in BUILTIN if not r.runtime]
RUNTIME = [r for r in BUILTIN if r.runtime]


def test_every_builtin_rule_has_cases():
    missing = [(r.pack, r.id) for r in STATIC if (r.pack, r.id) not in CASES]
    assert not missing, f"add positive/negative cases for {missing}"
    stale = [k for k in CASES if k not in {(r.pack, r.id) for r in STATIC}]
    assert not stale, f"cases for rules that no longer exist: {stale}"


def _fired(rule, dsl, source, task_for):
    return [v for v in check_source(source, task_for(dsl), [rule]) if v.rule == rule.id]


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: f"{r.pack}:{r.id}")
def test_rule_positive(rule, task_for):
    dsl, pos, _ = CASES[(rule.pack, rule.id)]
    assert _fired(rule, dsl, pos, task_for), f"{rule.id} did not fire on:\n{pos}"


@pytest.mark.parametrize("rule", STATIC, ids=lambda r: f"{r.pack}:{r.id}")
def test_rule_negative(rule, task_for):
    dsl, _, neg = CASES[(rule.pack, rule.id)]
    fired = _fired(rule, dsl, neg, task_for)
    assert not fired, f"{rule.id} fired on its near miss: {[(v.line, v.snippet) for v in fired]}"


@pytest.mark.parametrize("rule", RUNTIME, ids=lambda r: f"{r.pack}:{r.id}")
def test_runtime_rules_are_known_and_never_static(rule, task_for):
    assert rule.runtime in RUNTIME_CHECKS
    # Even a candidate that breaks everything gets no static violation from a runtime rule.
    assert check_source(CASES[("dsl-triton", "torch-compute")][1], task_for("triton"), [rule]) == []


def test_required_runtime_checks_exist():
    for rid in ("cuda-graph-capturable", "long-context", "dsl-kernel-runs", "inputs-unmodified", "output-fresh",
                "no-side-streams", "no-threads", "poison-consistent", "timed-outputs-correct", "task-files-unchanged"):
        assert rid in RUNTIME_CHECKS


def test_cute_cluster_primitives_are_allowed_and_the_cluster_pointer_mapping_is_not(task_for):
    # A long row split over a thread-block cluster (kernels/rmsnorm_cute): the cluster barrier and
    # st.async pushes into peers' shared memory are known-good device code; mapping a raw DSMEM
    # pointer (map_dsmem_ptr) is not needed for that and stays off the list.
    rule = next(r for r in STATIC if (r.pack, r.id) == ("dsl-cute", "allowed-names"))
    ok = cute(pre="""
        cute.arch.cluster_arrive_relaxed()
        cute.arch.cluster_wait()
        cute.arch.store_async_dsmem(p, v, m, 1)
        cute.arch.mbarrier_arrive_and_expect_tx(m, 4)
        r = cute.arch.block_idx_in_cluster()""")
    assert not _fired(rule, "cute", ok, task_for)
    assert _fired(rule, "cute", cute(pre="q = cute.arch.map_dsmem_ptr(p, 1)"), task_for)

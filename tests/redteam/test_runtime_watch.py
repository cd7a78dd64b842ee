"""The child's runtime watches on their own (the red-team candidates exercise them end to end):
what an honest entry does with torch reads as nothing; torch work in any spelling reads as work."""
from __future__ import annotations

import math
import subprocess
import sys
import textwrap

import torch

from harness.evaluate.guards import PYTHON_VALUES_LIMIT, TorchComputeWatch, instance_overrides


def _watch(fn) -> TorchComputeWatch:
    w = TorchComputeWatch()
    with w:
        fn()
    return w


def test_allocation_views_copies_and_casts_are_not_compute():
    x = torch.randn(8, 300, dtype=torch.bfloat16)

    def honest():
        y = torch.empty_like(x)
        z = x.contiguous().view(-1).reshape(8, 300).t().contiguous().float().to(torch.bfloat16)
        y.copy_(z.t())
        torch.zeros(4).fill_(1.0)
        x.new_empty((2, 3)).zero_()
        torch.arange(16).view(4, 4)[1:, :2].clone()
        int(torch.tensor([3]).item())

    assert _watch(honest).findings() == []


def test_operators_builtins_and_methods_are_compute():
    x = torch.randn(4, 64)
    for fn in (lambda: math.e ** x, lambda: sum(x.T), lambda: x / 2, lambda: x.exp(), lambda: torch.softmax(x, -1)):
        assert _watch(fn).findings(), "torch work went unseen"


def test_values_read_into_python_are_counted():
    x = torch.randn(PYTHON_VALUES_LIMIT + 1)
    assert _watch(lambda: x.tolist()).findings()
    assert _watch(lambda: x.numpy().sum()).findings()
    assert _watch(lambda: [float(v) for v in x]).findings()
    assert not _watch(lambda: x[:8].tolist()).findings()  # a few sizes or offsets are fine


def test_python_custom_op_is_compute():
    @torch.library.custom_op("watchtest::sm", mutates_args=())
    def _sm(t: torch.Tensor) -> torch.Tensor:
        return torch.softmax(t, dim=-1)

    x = torch.randn(4, 8)
    assert any("custom op implemented in Python" in f for f in _watch(lambda: torch.ops.watchtest.sm(x)).findings())


def test_instance_overrides_names_shadowed_methods():
    class Ep:
        def send(self):
            return 1

    e = Ep()
    assert instance_overrides(e) == []
    e.send = lambda: 2  # type: ignore[method-assign]
    e.data = 3
    assert instance_overrides(e) == ["send"]


def test_introspection_watch_sees_gc_and_frames_from_watched_files_only(tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text("import triton\n_g = triton.testing.gc\n_g.get_objects()\n"
                    "try:\n    raise KeyError\nexcept KeyError as e:\n    getattr(getattr(e, '__traceback__'), 'tb_frame')\n")
    other = tmp_path / "other.py"
    other.write_text("import gc\ngc.get_objects()\n")
    code = textwrap.dedent(f"""
        import runpy
        from harness.evaluate.guards import IntrospectionWatch
        w = IntrospectionWatch(); w.install(); w.watch_file({str(cand)!r})
        runpy.run_path({str(other)!r})
        runpy.run_path({str(cand)!r})
        print(w.take())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert "gc.get_objects at cand.py:3" in out
    assert "tb_frame" in out
    assert "other.py" not in out


def test_a_triton_ops_body_is_watched():
    # torch runs a triton_op's body with the dispatch mode off; the watch runs it itself, watched,
    # so torch work beside the op's kernels is seen, and the kernels and allocations are not work.
    import triton
    import triton.language as tl

    @triton.jit
    def _twice(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n) * 2, mask=i < n)

    @torch.library.triton_op("watchtest::twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        y = torch.empty_like(x)
        torch.library.wrap_triton(_twice)[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y

    @torch.library.triton_op("watchtest::twice_by_torch", mutates_args=())
    def twice_by_torch(x: torch.Tensor) -> torch.Tensor:
        z = x * 2
        y = torch.empty_like(x)
        torch.library.wrap_triton(_twice)[(triton.cdiv(x.numel(), 64),)](z, y, x.numel(), BLOCK=32)
        return y

    x = torch.randn(100)
    assert _watch(lambda: torch.ops.watchtest.twice(x)).findings() == []
    assert any("aten.mul" in f for f in _watch(lambda: torch.ops.watchtest.twice_by_torch(x)).findings())


def test_the_watch_reads_the_settings_frozen_before_candidate_code(monkeypatch):
    """Candidate code that replaces the module's list of permitted ops (enum.global_enum did) changes
    nothing a watch built from the frozen settings reads; the digest the parent compares changes
    only with the settings themselves."""
    from harness.evaluate import guards

    frozen = guards.watch_settings()

    class Everything:
        def __contains__(self, item):
            return True

    monkeypatch.setattr(guards, "TORCH_NONCOMPUTE_OPS", Everything())
    x = torch.randn(4, 64)
    w = TorchComputeWatch(frozen)
    with w:
        torch.softmax(x, -1)
    assert w.findings(), "the watch read the replaced module name"
    assert frozen.digest() == guards.WatchSettings(frozen.noncompute_ops, frozen.to_python, PYTHON_VALUES_LIMIT).digest()
    assert frozen.digest() != guards.WatchSettings(frozen.noncompute_ops | {"_softmax"}, frozen.to_python,
                                                   PYTHON_VALUES_LIMIT).digest()

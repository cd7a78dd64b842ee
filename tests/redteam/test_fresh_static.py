"""Regressions from the outside red-team set (bench/fresh_redteam, issues 17 and 25), static stage.

Each spelling here passed every check before its fix; the assertions name the class, not the
payload: an annotation is code for typing.get_type_hints and torch.library's schema inference, so
it must be a plain type; typing's evaluators are off the allowlist.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from harness.guard import check_source
from harness.authoring.tasks import load_task

REPO = Path(__file__).resolve().parents[2]

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    c = tl.arange(0, BLOCK)
    v = tl.load(x_ptr + row * n + c, mask=c < n, other=-float("inf")).to(tl.float32)
    e = tl.exp(v - tl.max(v, axis=0))
    tl.store(y_ptr + row * n + c, (e / tl.sum(e, axis=0)).to(y_ptr.dtype.element_ty), mask=c < n)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _k[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y
'''


def errors(src: str) -> set[str]:
    task = load_task(REPO / "kernels" / "softmax")
    return {v.rule for v in check_source(src, task) if v.severity == "error"}


HIDDEN = {
    # a module-level name bound to a string, used as an annotation, evaluated by get_type_hints
    "name bound to a payload": 'import typing\n_C = "print(1)"\n_H = "ex" + "ec(_C)"\n\n\n'
                               'def _f(x: _H) -> None:\n    return None\n\n\ntyping.get_type_hints(_f)\n',
    # a class annotation string, evaluated by get_type_hints(cls)
    "class annotation string": 'import typing\n_C = "print(1)"\n\n\nclass _A:\n    b: "ex" "ec(_C) or int"\n\n\n'
                               'typing.get_type_hints(_A)\n',
    # torch.library.triton_op infers the schema by eval()ing string annotations
    "triton_op schema string": '_C = "print(1)"\n\n\n@torch.library.triton_op("fr::op", mutates_args=())\n'
                               'def _op(x: "[ex" "ec(_C), torch.Tensor][1]") -> torch.Tensor:\n'
                               '    return torch.empty_like(x)\n',
    # ForwardRef is eval under another name
    "typing.ForwardRef": 'import typing\n_R = typing.ForwardRef("int")\n',
}


@pytest.mark.parametrize("name", sorted(HIDDEN))
def test_code_in_annotations_is_refused(name):
    assert "allowed-names" in errors(KERNEL + "\n" + HIDDEN[name]), name


def test_plain_annotations_stay_allowed():
    src = KERNEL.replace("def softmax(x):", "def softmax(x: torch.Tensor) -> torch.Tensor:") + '''
import typing


class Plan:
    width: int = 4
    name: "typing.Optional[str]" = None

    def go(self, x: "Plan", n: typing.Optional[int] = None, k: int | None = None) -> typing.Tuple[int, ...]:
        return (self.width,)


Alias = typing.Optional[int]


def helper(a: Alias, b: typing.Literal[1, 2] = 1) -> None:
    return None
'''
    assert not errors(src)


def test_typing_evaluators_are_not_allowlisted():
    fired = errors(KERNEL + "\nimport typing\n_H = typing.get_type_hints\n")
    assert "allowed-names" in fired


@pytest.mark.parametrize("line", [
    # a storage's from_file, reached from a tensor value (no banned import or name on the way)
    '_S = torch.empty(0).untyped_storage().from_file("/etc/hostname", False, 8)',
    # a numpy array's dump pickles it to a path
    '_A = torch.zeros(4).numpy()\n_A.dump("/tmp/x")',
])
def test_file_io_through_a_value_is_refused(line):
    assert "no-io" in errors(KERNEL + "\n" + line + "\n")


def test_torch_math_in_a_kernel_hook_is_on_the_entry_path():
    # The entry launches a staging copy; the softmax is computed by torch in the Config's pre_hook,
    # host code Triton runs before every launch of the kernel.
    src = '''
import torch
import triton
import triton.language as tl


def _hook(nargs):
    y = nargs["y_ptr"]
    y.copy_(nargs["x_ptr"].float().softmax(-1).to(y.dtype))


@triton.autotune(configs=[triton.Config({"BLOCK": 1024}, pre_hook=_hook)], key=["n"])
@triton.jit
def _stage(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _stage[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel())
    return y
'''
    assert "torch-compute" in errors(src)
    assert "torch-compute" not in errors(src.replace('y.copy_(nargs["x_ptr"].float().softmax(-1).to(y.dtype))',
                                                     'return None'))


def test_a_launcher_built_with_functools_partial_and_returned_by_a_method_is_a_launch():
    src = KERNEL.replace('''def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    _k[(x.shape[0],)](x, y, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return y''', '''import functools


class Plan:
    def launcher(self, rows, cols):
        return functools.partial(_k[(rows,)], BLOCK=triton.next_power_of_2(cols))


_PLAN = Plan()


def softmax(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    go = _PLAN.launcher(x.shape[0], x.shape[1])
    go(x, y, x.shape[1])
    return y''')
    assert "functools.partial(_k[" in src and not errors(src)
    # a partial of something else is no launch
    assert "triton-launch" in errors(src.replace("functools.partial(_k[(rows,)]", "functools.partial(print"))


@pytest.mark.parametrize("body", [
    # an instance attribute on the output shadows Tensor.detach: the harness's .detach() ran the work
    "    y.detach = print\n",
    # a torch class reached through a list, so no imported name is written to
    "    setattr([torch.Tensor][0], \"detach\", print)\n",
    # a memo kept on the input tensor
    "    x.memo = y\n",
])
def test_attribute_writes_on_objects_the_module_does_not_own_are_refused(body):
    src = KERNEL.replace("    return y\n", body + "    return y\n")
    assert body in src and "allowed-names" in errors(src)


def test_attribute_writes_on_own_objects_stay_allowed():
    src = KERNEL + '''

class Launcher:
    count = 0

    def __init__(self, block):
        self.block = block
        self.stats = {}

    def bump(self):
        self.count += 1
        self.stats["n"] = self.count

        def inner():
            self.block, self.count = 1024, 0
        inner()


_L = Launcher(1024)
_L.block = 2048
Launcher.count = 0
'''
    assert not errors(src)


def test_private_attributes_of_foreign_objects_are_refused_and_own_ones_allowed():
    foreign = "_S = torch.empty(0).untyped_storage()._share_filename_cpu_()\n"
    assert "allowed-names" in errors(KERNEL + "\n" + foreign)
    own = '''

class _Impl:
    def __init__(self):
        self._calls = 0

    def _go(self):
        self._calls += 1
        return self._calls


_I = _Impl()
_N = _I._go()
'''
    assert not errors(KERNEL + own)

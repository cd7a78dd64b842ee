"""No allowlisted name reaches into another module, and getattr with a literal name is judged as the
attribute spelling by every rule (issue 37, class 2)."""
from __future__ import annotations

import pytest

from harness.guard import check_source

HEAD = '''import dataclasses
import enum
import functools
import typing

import torch
import triton
import triton.language as tl


@triton.jit
def _touch(x_ptr, y_ptr):
    tl.store(y_ptr, tl.load(x_ptr))

'''
ENTRY = '''

def softmax(x):
    y = torch.empty_like(x)
    _touch[(1,)](x, y)
    return {ret}
'''


def found(task, module: str = "", ret: str = "y") -> list:
    return [v for v in check_source(HEAD + module + ENTRY.format(ret=ret), task) if v.severity == "error"]


def rules(task, module: str = "", ret: str = "y") -> set[str]:
    return {v.rule for v in found(task, module, ret)}


REACHING = {
    # writes the members into sys.modules[cls.__module__]: any module, the evaluator's guards included
    "enum.global_enum": "@enum.global_enum\nclass _E(enum.IntEnum):\n    A = 1\n",
    "enum functional API": "_E = enum.Enum('E', 'A B')\n",
    "module= keyword": "class _Q:\n    def __init__(self, **k):\n        pass\n\n\n_q = _Q(module='harness.evaluate.guards')\n",
    "enum class handed on": "_mk = functools.partial(enum.IntEnum, 'E')\n",
    "dataclasses.make_dataclass": "_D = dataclasses.make_dataclass('D', ['a'])\n",
    "typing.overload (a global registry)": "@typing.overload\ndef _f(a: int) -> int: ...\n",
    "getattr as a value": "_g = functools.reduce(getattr, ['softmax'], torch.Tensor)\n",
    "setattr as a value": "_r = list(map(setattr, [torch.Tensor], ['softmax'], [None]))\n",
    "private attribute past an allowed name": "_s = torch.Tensor._make_subclass\n",
}


@pytest.mark.parametrize("module", REACHING.values(), ids=REACHING.keys())
def test_names_that_reach_other_modules_are_refused(softmax_task, module):
    assert "allowed-names" in rules(softmax_task, module)


def test_an_enum_written_with_class_syntax_is_fine(softmax_task):
    src = "class _Mode(enum.IntEnum):\n    ROWS = enum.auto()\n\n\n_M = _Mode(1)\n_ok = isinstance(_M, enum.Enum)\n"
    assert rules(softmax_task, src) == set()


SPELLINGS = {  # the attribute spelling, and the getattr/hasattr spelling of the same read
    "a module's function": ("_f = torch.from_file\n", "_f = getattr(torch, 'from_file')\n"),
    "a storage's method": ("_f = torch.empty(1).untyped_storage().from_file('/etc/hostname', False, 8)\n",
                           "_f = getattr(torch.empty(1).untyped_storage(), 'from_file')('/etc/hostname', False, 8)\n"),
    "a private name of a value": ("_s = torch.Tensor._make_subclass\n", "_s = getattr(torch.Tensor, '_make_sub' 'class')\n"),
    "a dunder": ("_d = torch.Tensor.__dict__\n", "_d = hasattr(torch.Tensor, '__dict__')\n"),
}


@pytest.mark.parametrize("attribute,lookup", SPELLINGS.values(), ids=SPELLINGS.keys())
def test_getattr_with_a_literal_trips_what_the_attribute_trips(softmax_task, attribute, lookup):
    expected = rules(softmax_task, attribute)
    assert expected and rules(softmax_task, lookup) == expected


def test_getattr_on_the_entry_path_is_a_tensor_method_like_any_other(softmax_task):
    # a tensor method through getattr, with a default that would have hidden the call
    assert "torch-compute" in rules(softmax_task, ret="getattr(x.float(), 'softmax', None)(-1).to(x.dtype)")
    # a bound tensor method handed on
    assert "torch-compute" in rules(softmax_task, ret="(lambda f: f(-1))(x.float().softmax).to(x.dtype)")


def test_violations_found_in_the_attribute_spelling_point_at_the_getattr(softmax_task):
    [v] = found(softmax_task, "_unused = 1\n_f = getattr(torch,\n             'from_file')\n")
    assert (v.rule, v.line, v.col) == ("no-io", HEAD.count("\n") + 2, 14)  # at `torch`, inside the getattr
    assert v.snippet == "_f = getattr(torch,"


def test_getattr_on_a_value_with_a_default_stays_fine(softmax_task):
    src = ("def _smem(compiled):\n    return getattr(getattr(compiled, 'metadata', compiled), 'shared', 0)\n\n\n"
           "def _sms():\n    p = torch.cuda.get_device_properties(0)\n"
           "    return getattr(p, 'max_threads_per_multi_processor', 2048)\n")
    assert rules(softmax_task, src, "y if _sms() and _smem(None) >= 0 else y") == set()


OP = "@torch.library.triton_op('{ns}::myop', mutates_args=())\ndef _op(x: torch.Tensor) -> torch.Tensor:\n" \
     "    y = torch.empty_like(x)\n    torch.library.wrap_triton(_touch)[(1,)](x, y)\n    return y\n"


def test_a_registered_op_is_callable_but_not_the_rest_of_its_namespace(softmax_task):
    assert rules(softmax_task, OP.format(ns="wsmine"), "torch.ops.wsmine.myop(x)") == set()
    assert "torch-compute" in rules(softmax_task, OP.format(ns="prims"), "torch.ops.prims.exp(x)")
    assert "allowed-names" in rules(softmax_task, OP.format(ns="prims") + "_e = torch.ops.prims.exp\n")

"""The entry-path walk follows objects kept in containers and names bound anywhere at module level
(issue 37, class 2): torch work stored in a dict, a list, a class attribute, a tuple unpacking, a
name bound inside a module-level `if`/`try`/`with`, or by a function that fills a table, is on
the entry path when the entry reads that container or name."""
from __future__ import annotations

import pytest

from harness.guard import check_source

HEAD = '''import functools

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
SOFTMAX = "lambda t: t.float().softmax(-1)"
STORED = {
    "dict item set later": (f"_OPS = {{}}\n_OPS['f'] = {SOFTMAX}\n", "_OPS['f'](x)"),
    "dict.update": (f"_OPS = {{}}\n_OPS.update(f={SOFTMAX})\n", "_OPS.get('f')(x)"),
    "list.append": (f"_L = []\n_L.append({SOFTMAX})\n", "_L[0](x)"),
    "tuple unpacking": (f"_A, _B = 1, ({SOFTMAX})\n", "_B(x)"),
    "walrus": (f"(_W := ({SOFTMAX}))\n", "_W(x)"),
    "class attribute set from outside": (f"class _K:\n    pass\n\n\n_K.f = staticmethod({SOFTMAX})\n", "_K.f(x)"),
    "filled in a module-level loop": (f"_T = {{}}\nfor _n in ('s',):\n    _T[_n] = {SOFTMAX}\n", "_T['s'](x)"),
    "filled by a function": (f"_T = {{}}\n\n\ndef _reg():\n    _T['s'] = {SOFTMAX}\n\n\n_reg()\n", "_T['s'](x)"),
    "a def stored by name": ("_T = {}\n\n\ndef _f(t):\n    return t.float().softmax(-1)\n\n\n_T['s'] = _f\n", "_T['s'](x)"),
    "bound inside if": (f"if True:\n    _F = {SOFTMAX}\n", "_F(x)"),
    "bound inside try": (f"try:\n    _F = {SOFTMAX}\nexcept ImportError:\n    _F = None\n", "_F(x)"),
    "bound under global": (f"_F = None\n\n\ndef _init():\n    global _F\n    _F = {SOFTMAX}\n\n\n_init()\n", "_F(x)"),
    "a partial of torch": ("_P = functools.partial(torch.softmax, dim=-1)\n", "_P(x.float())"),
    "a default argument": ("", "(lambda t, f=(lambda u: u.float().softmax(-1)): f(t))(x)"),
}


@pytest.mark.parametrize("module,ret", STORED.values(), ids=STORED.keys())
def test_torch_reached_through_a_stored_object_is_on_the_entry_path(softmax_task, module, ret):
    src = HEAD + module + ENTRY.format(ret=f"{ret}.to(x.dtype)")
    assert "torch-compute" in {v.rule for v in check_source(src, softmax_task)}


def test_containers_the_entry_does_not_read_stay_off_it(softmax_task):
    src = HEAD + f"_T = {{}}\n_T['s'] = {SOFTMAX}\n" + ENTRY.format(ret="y")
    assert [v.rule for v in check_source(src, softmax_task) if v.severity == "error"] == []

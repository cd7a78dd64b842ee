"""No state kept across calls on the entry path (issue 37, class 3: a kernel whose arithmetic
changes after many calls is right on what is tested and wrong on what users pass). Writes to
objects that outlive a call are refused however they are spelled; a memo cache of compiled kernels
or configs, a lazily built extension, and diagnostics the path never reads stay fine."""
from __future__ import annotations

import pytest

from harness.guard import check_source

HEAD = '''import functools
import itertools

import torch
import triton
import triton.language as tl


@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n), mask=i < n)

'''


def source(top: str, body: str) -> str:
    body = "\n".join("    " + line for line in body.strip("\n").splitlines())
    return (HEAD + top + "\n\ndef softmax(x):\n    y = torch.empty_like(x)\n" + body
            + "\n    _k[(1,)](x, y, x.numel(), BLOCK=block)\n    return y\n")


def state_findings(task, top: str, body: str) -> list[str]:
    return [v.message for v in check_source(source(top, body), task) if v.rule == "no-module-state"]


COUNTERS = {
    "global counter": ("_N = 0\n", "global _N\n_N += 1\nblock = 1024 if _N < 50 else 512"),
    "dict item counter": ("_C = {}\n", "_C['n'] = _C.get('n', 0) + 1\nblock = 1024 if _C['n'] < 50 else 512"),
    "counter through a local name": ("_C = {}\n", "n = _C.get('n', 0)\n_C['n'] = n + 1\nblock = 1024 if n < 50 else 512"),
    "two caches feeding each other": ("_A = {}\n_B = {}\n",
                                      "_A['n'] = _B.get('n', 0)\n_B['n'] = _A['n'] + 1\nblock = 1024 if _B['n'] < 50 else 512"),
    "list grown each call": ("_SEEN = []\n", "_SEEN.append(1)\nblock = 1024 if len(_SEEN) < 50 else 512"),
    "module-level iterator": ("_TICK = itertools.count()\n", "block = 1024 if next(_TICK) < 50 else 512"),
    "iterator read without next()": ("_TICK = itertools.count()\n",
                                     "block = [1024 if i < 50 else 512 for i, _ in zip(_TICK, [0])][0]"),
    "class attribute": ("class _S:\n    n = 0\n", "_S.n += 1\nblock = 1024 if _S.n < 50 else 512"),
    "instance state read back": ("class _L:\n    def __init__(self):\n        self.n = 0\n\n    def step(self):\n"
                                 "        self.n += 1\n        return self.n\n\n\n_LAUNCHER = _L()\n",
                                 "block = 1024 if _LAUNCHER.step() < 50 else 512"),
    "mutable default argument": ("def _count(_box=[0]):\n    _box[0] += 1\n    return _box[0]\n",
                                 "block = 1024 if _count() < 50 else 512"),
    "alias of a module dict": ("_STATE = {'n': 0}\n", "s = _STATE\ns['n'] += 1\nblock = 1024 if s['n'] < 50 else 512"),
    "what a cached function returned": ("@functools.cache\ndef _state():\n    return {'n': 0}\n",
                                        "_state()['n'] += 1\nblock = 1024 if _state()['n'] < 50 else 512"),
    "closure counter": ("def _make():\n    n = 0\n\n    def step():\n        nonlocal n\n        n += 1\n        return n\n"
                        "    return step\n\n\n_STEP = _make()\n", "block = 1024 if _STEP() < 50 else 512"),
    "toggle in an expression": ("_T = {}\n", "_T['b'] = 512 if _T.get('b') == 1024 else 1024\nblock = _T['b']"),
    "toggle in statements": ("_T = {}\n", "if _T.get('b'):\n    _T['b'] = 0\nelse:\n    _T['b'] = 1\n"
                             "block = 1024 if _T['b'] else 512"),
    "the input kept": ("_LAST = {}\n", "_LAST[tuple(x.shape)] = x\nblock = 1024"),
}


@pytest.mark.parametrize("top,body", COUNTERS.values(), ids=COUNTERS.keys())
def test_state_kept_across_calls_is_refused(softmax_task, top, body):
    assert state_findings(softmax_task, top, body)


HONEST = {
    "a config memo": ("_BLOCK = {}\n", "block = _BLOCK.get(x.shape[1])\nif block is None:\n"
                      "    block = _BLOCK[x.shape[1]] = triton.next_power_of_2(x.shape[1])"),
    "setdefault of a config": ("_BLOCK = {}\n", "block = _BLOCK.setdefault(x.shape[1], 1024 if x.shape[1] > 512 else 256)"),
    "a compiled kernel per dtype": ("_COMPILED = {}\n", "block = 1024\nkey = (x.dtype, x.shape[1])\nif key not in _COMPILED:\n"
                                    "    _COMPILED[key] = _k.warmup(x, x, x.numel(), BLOCK=block, grid=(1,))"),
    "a config chosen once, stored back": ("_CHOSEN = {}\n\n\ndef _candidates(n):\n    return [(1024, 4), (512, 4)]\n",
                                          "chosen = _CHOSEN.get(x.shape[1])\nfor block, warps in [chosen] if chosen else "
                                          "_candidates(x.shape[1]):\n    break\n_CHOSEN[x.shape[1]] = (block, warps)"),
    "a scratch buffer made on a miss": ("_WS = {}\n", "key = (x.device, x.shape[0])\nif key not in _WS:\n"
                                       "    _WS[key] = torch.empty(x.shape[0], device=x.device)\nws = _WS[key]\nblock = 1024"),
    "diagnostics never read": ("last_launch = {}\n", "block = 1024\nlast_launch.update(grid=(1,), block=block)"),
    "a launch count never read": ("class _L:\n    def __init__(self):\n        self.launches = 0\n\n"
                                  "    def go(self):\n        self.launches += 1\n        return 1024\n\n\n_LAUNCHER = _L()\n",
                                  "block = _LAUNCHER.go()"),
    "a cached device query": ("@functools.lru_cache(maxsize=None)\ndef _sms(device):\n"
                              "    return torch.cuda.get_device_properties(device).multi_processor_count\n",
                              "block = 1024 if x.is_cuda and _sms(x.device) > 100 else 512"),
    "a table built at import": ("_SQ = {}\nfor _i in range(4):\n    _SQ[_i] = _i * _i\n", "block = 1024 * (1 + _SQ[0])"),
    "locals written freely": ("", "sizes = {}\nsizes['b'] = 1024\nacc = []\nacc.append(sizes['b'])\nblock = acc[0]"),
}


@pytest.mark.parametrize("top,body", HONEST.values(), ids=HONEST.keys())
def test_launcher_caches_and_import_time_tables_stay_fine(softmax_task, top, body):
    assert state_findings(softmax_task, top, body) == []
    assert [v.rule for v in check_source(source(top, body), softmax_task) if v.severity == "error"] == []

"""Cheat (class 1, fabricated timing from inside the child): the child runs as `__main__`, so
`import __main__` reaches its classes; the timing module is reached through
`operator.attrgetter("modules")(sys)`. From its first timed call on (no torch function mode, no
graph capture: patched after the identity checks of import and correctness), it scales every
figure the child reports about its own
runs by 0.6: the interleaved samples of the old in-child timing (time_shape wrapped), and the
CUDA-event figure of each parent-timed batch (the channel's `send`, wrapped on the class). The
figures that decide are the parent's clock over the batch, so the forged child figure changes
nothing (it reads like host overhead); the patched harness functions are the named reason.
Expect: harness-patched
Device: gpu
"""
import operator
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from _honest import softmax as honest  # noqa: E402

import __main__  # noqa: E402

_mods = operator.attrgetter("modules")(sys)
SCALE = 0.6


def _install():
    """Patched only once timing starts, so the identity snapshot taken after the import and after
    each correctness call sees nothing."""
    _timing = _mods.get("harness.evaluate.timing")
    if _timing is not None:
        _real = _timing.time_shape

        def _scaled(child, req):
            res = _real(child, req)
            d = res.get("roles", {}).get("candidate")
            if d:
                for k in ("event_us", "event_all_us", "wall_us"):
                    d[k] = [x * SCALE for x in d[k]]
            return res

        _timing.time_shape = _scaled
    _Endpoint = getattr(__main__, "Endpoint", None)
    if _Endpoint is not None:
        _send = _Endpoint.send

        def send(self, header, tensors=None):
            if isinstance(header, dict) and header.get("n") and "child_us" in header:  # a batch's reply
                ev = header.get("event_us")
                header = dict(header, event_us=ev * SCALE if ev else ev, child_us=header["child_us"] * SCALE)
            return _send(self, header, tensors)

        _Endpoint.send = send


def _timed() -> bool:
    """No torch function mode (the correctness calls' watch), not capturing a CUDA graph, on the
    default stream (the graph check warms up on a side stream)."""
    if torch._C._len_torch_function_stack():
        return False
    if torch.cuda.is_available():
        return not torch.cuda.is_current_stream_capturing() and \
            torch.cuda.current_stream() == torch.cuda.default_stream()
    return True


_installed = []


def softmax(x):
    if not _installed and _timed():
        _installed.append(1)
        _install()
    return honest(x)

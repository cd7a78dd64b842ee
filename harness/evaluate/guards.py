"""Runtime guards used inside the child: they watch the candidate while it runs.

Everything here is set up *before* the candidate is imported, so the objects it captures (the
original functions, the thread list, the launch counter) predate anything the candidate could do.
A candidate runs in the same process and could still reach them; the identity snapshot turns the
blunt ways of doing that (reassigning a torch or harness function) into a rejection, and the parent
recomputes every correctness verdict from raw outputs anyway.
"""
from __future__ import annotations

import inspect
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class LaunchCounter:
    """Counts launches of Triton kernels and can turn them into no-ops ("ghost" mode).

    Wraps `run` of Triton's kernel classes (JITFunction for compiled kernels, InterpretedFunction
    under TRITON_INTERPRET=1, where launch hooks never fire) at class level, so kernels defined
    anywhere (candidate, helper modules, autotuned) are seen. On real GPUs the launch-enter hook
    counts launches that reached the driver, a second opinion the candidate can't satisfy by
    calling `run` with warmup=True.
    """

    launches: int = 0
    driver_launches: int = 0
    kernels: set[str] = field(default_factory=set)
    ghost: bool = False
    originals: dict[str, Callable] = field(default_factory=dict)
    hook_installed: bool = False

    def install(self) -> None:
        import triton.runtime.jit as jit

        classes: list[type] = [jit.JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            classes.append(InterpretedFunction)
        except ImportError:  # pragma: no cover - every Triton 3.x has it
            pass
        for cls in classes:
            orig = cls.run
            self.originals[cls.__qualname__] = orig
            cls.run = self._wrap(orig)  # type: ignore[method-assign]
        self._install_hook()

    def _wrap(self, orig: Callable) -> Callable:
        counter = self

        def run(kernel: Any, *args: Any, grid: Any = None, warmup: bool = False, **kwargs: Any) -> Any:
            if not warmup:
                counter.launches += 1
                counter.kernels.add(getattr(kernel, "__name__", None) or repr(kernel))
                if counter.ghost:
                    return None
            return orig(kernel, *args, grid=grid, warmup=warmup, **kwargs)

        run.__wrapped__ = orig  # type: ignore[attr-defined]
        return run

    def _install_hook(self) -> None:
        def hook(*_a: Any, **_k: Any) -> None:
            self.driver_launches += 1

        try:  # Triton >= 3.4: knobs.runtime.launch_enter_hook is a HookChain (3.9) or a slot (3.4-3.6)
            from triton import knobs

            chain = knobs.runtime.launch_enter_hook
            if hasattr(chain, "add"):
                chain.add(hook)
            elif chain is None:
                knobs.runtime.launch_enter_hook = hook
            else:
                prev = chain

                def both(*a: Any, **k: Any) -> None:
                    hook()
                    prev(*a, **k)

                knobs.runtime.launch_enter_hook = both
            self.hook_installed = True
        except Exception:  # older Triton: CompiledKernel.launch_enter_hook
            try:
                from triton.compiler.compiler import CompiledKernel

                CompiledKernel.launch_enter_hook = hook  # type: ignore[attr-defined]
                self.hook_installed = True
            except Exception:
                self.hook_installed = False

    def reset(self) -> None:
        self.launches = 0
        self.driver_launches = 0
        self.kernels = set()


def identity_snapshot(extra: dict[str, Any] | None = None) -> dict[str, int]:
    """id() of every function the harness relies on: torch's API, timers, the channel, builtins.

    Reassigning any of them (a candidate patching torch.softmax, Event.elapsed_time,
    time.perf_counter, torch.allclose...) changes an id and is caught by `changed_identities`.
    """
    import builtins
    import hashlib
    import hmac
    import json

    import torch

    snap: dict[str, int] = {}

    def take(prefix: str, obj: Any) -> None:
        for name in dir(obj):
            if name.startswith("__") and name not in ("__eq__", "__sub__", "__getitem__", "__setitem__"):
                continue
            try:
                # The raw attribute: getattr would build a fresh bound method (new id) each time.
                v = inspect.getattr_static(obj, name)
            except Exception:
                continue
            # (modules left out: torch loads some submodules lazily, which would read as a patch)
            if callable(v) or isinstance(v, (type, classmethod, staticmethod, property)):
                snap[f"{prefix}.{name}"] = id(v)

    take("torch", torch)
    take("torch.Tensor", torch.Tensor)
    take("torch.nn.functional", torch.nn.functional)
    take("torch.cuda", torch.cuda)
    take("torch.cuda.Event", torch.cuda.Event)
    take("torch.cuda.CUDAGraph", torch.cuda.CUDAGraph)
    take("time", time)
    take("os", os)
    take("threading", threading)
    take("hmac", hmac)
    take("hashlib", hashlib)
    take("json", json)
    for name in ("isinstance", "type", "id", "len", "abs", "min", "max", "sum", "print", "getattr"):
        snap[f"builtins.{name}"] = id(getattr(builtins, name))
    for mod_name in ("harness.evaluate.channel", "harness.evaluate.guards", "harness.evaluate.timing",
                     "harness.evaluate.child"):
        mod = sys.modules.get(mod_name)
        if mod is not None:
            take(mod_name, mod)
            for cname in dir(mod):
                c = getattr(mod, cname)
                if isinstance(c, type) and c.__module__ == mod_name:
                    take(f"{mod_name}.{cname}", c)
    for k, v in (extra or {}).items():
        snap[k] = id(v)
    return snap


def changed_identities(before: dict[str, int], after: dict[str, int]) -> list[str]:
    return sorted(k for k, v in before.items() if k in after and after[k] != v)


def live_threads() -> set[int]:
    return {t.ident for t in threading.enumerate() if t.is_alive() and t.ident is not None}


def native_thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux
        return threading.active_count()


def storage_span(t: Any) -> tuple[int, int]:
    s = t.untyped_storage()
    return s.data_ptr(), s.data_ptr() + s.nbytes()


def overlaps(a: Any, b: Any) -> bool:
    a0, a1 = storage_span(a)
    b0, b1 = storage_span(b)
    return a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0


def check_outputs(outs: list[Any], inputs: list[Any], device: str,
                  container: type | None = None) -> list[tuple[str, str]]:
    """Plain torch.Tensor, own storage, right device, no alias of an input or of each other."""
    import torch

    bad: list[tuple[str, str]] = []
    if container is not None and container not in (torch.Tensor, tuple):
        bad.append(("output-fresh", f"the entry returned a {container.__name__}; return a torch.Tensor "
                                    "(or a tuple of them)"))
    for i, o in enumerate(outs):
        if type(o) is not torch.Tensor:
            kind = "a torch.Tensor subclass" if isinstance(o, torch.Tensor) else type(o).__name__
            bad.append(("output-fresh", f"output {i} is {kind} ({type(o).__module__}.{type(o).__qualname__}); "
                                        "return a plain torch.Tensor"))
            continue
        if o.device.type != device:
            bad.append(("output-fresh", f"output {i} is on {o.device}, inputs are on {device}"))
        if o.is_sparse or o.layout != torch.strided:
            bad.append(("output-fresh", f"output {i} has layout {o.layout}; return a dense strided tensor"))
            continue
        for j, x in enumerate(inputs):
            if isinstance(x, torch.Tensor) and x.numel() and o.numel() and overlaps(o, x):
                bad.append(("output-fresh", f"output {i} shares memory with input {j} (aliases an input); "
                                                    "write the result into a new tensor"))
        for j in range(i):
            oj = outs[j]
            if type(oj) is torch.Tensor and oj.numel() and o.numel() and overlaps(o, oj):
                bad.append(("output-fresh", f"outputs {j} and {i} share memory"))
    return bad


def inputs_unchanged(inputs: list[Any], saved: list[Any]) -> list[int]:
    """Indices of tensor inputs whose bits differ from the copy taken before the call."""
    import torch

    changed = []
    for i, (x, s) in enumerate(zip(inputs, saved)):
        if isinstance(x, torch.Tensor):
            if x.shape != s.shape or x.dtype != s.dtype:
                changed.append(i)
                continue
            xa, sa = x.detach(), s
            # Compare bits, so NaN inputs (if a task has them) compare equal to themselves.
            if xa.is_floating_point() and xa.element_size() in (2, 4, 8):
                iv = {2: torch.int16, 4: torch.int32, 8: torch.int64}[xa.element_size()]
                if not torch.equal(xa.contiguous().view(iv), sa.contiguous().view(iv)):
                    changed.append(i)
            elif not torch.equal(xa, sa):
                changed.append(i)
    return changed


POISON_BYTES = (0xFF, 0x3C)  # 0xFFFF is NaN in bf16/fp16/fp32; 0x3C3C is a plausible 0.0115 (bf16)


def poison_allocator(pattern: int, nbytes: int, device: str) -> None:
    """Leave the allocator's free memory filled with `pattern`, so torch.empty returns poison.

    On CUDA the caching allocator keeps freed blocks: empty the cache, then allocate, fill and free
    blocks that cover what the call will ask for (large and small pools). On CPU, glibc reuses
    freed chunks of the same size; blocks of the output's exact size and a few multiples catch the
    common cases (best effort: fresh mmap'd pages read as zeros, which fail correctness anyway).
    """
    import torch

    byte = POISON_BYTES[(pattern - 1) % len(POISON_BYTES)]
    nbytes = max(int(nbytes), 1 << 12)
    blocks = []
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        for size in (nbytes * 4, nbytes, nbytes):
            blocks.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
        blocks += [torch.empty(1 << 19, dtype=torch.uint8, device="cuda") for _ in range(16)]  # small pool
        for b in blocks:
            b.fill_(byte)
        torch.cuda.synchronize()
    else:
        for size in (nbytes, nbytes, nbytes * 2, nbytes * 4):
            b = torch.empty(size, dtype=torch.uint8)
            b.fill_(byte)
            blocks.append(b)
    del blocks

"""Runtime guards used inside the child: they watch the candidate while it runs.

Everything here is set up *before* the candidate is imported, so the objects it captures (the
original functions, the thread list, the launch counter) predate anything the candidate could do.
A candidate runs in the same process and could still reach them; the identity snapshot turns the
blunt ways of doing that (reassigning a torch or harness function) into a rejection, and the parent
recomputes every correctness verdict from raw outputs anyway. These are hints, never the proof
(docs/threat-model.md): what decides is produced or verified where the candidate can't reach.
"""
from __future__ import annotations

import hashlib
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
        import triton.runtime.jit as jit  # child start-up: torch/triton load after this module, in the timed preload

        classes: list[type] = [jit.JITFunction]
        try:
            # child start-up: torch/triton load after this module, in the timed preload
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
                # child start-up: torch/triton load after this module, in the timed preload
                from triton.compiler.compiler import CompiledKernel

                CompiledKernel.launch_enter_hook = hook  # type: ignore[attr-defined]
                self.hook_installed = True
            except Exception:
                self.hook_installed = False

    def reset(self) -> None:
        self.launches = 0
        self.driver_launches = 0
        self.kernels = set()


@dataclass
class CuteLaunchCounter:
    """LaunchCounter's counterpart for CuTe DSL (nvidia-cutlass-dsl) tasks.

    A compiled CuTe DSL program (what `cute.compile` returns, or what a direct call of a @cute.jit
    function compiles) launches its kernels from native host code, out of Python's sight; every
    execution of one passes through `JitExecutor.run_compiled_program` (cutlass.base_dsl), on the
    first call of a compiled function (through `JitCompiledFunction.run_compiled_program`), on later
    ones and through `.to(device)` alike. Both are wrapped at class level: each execution is counted
    once, and in ghost mode skipped, so the no-op swap leaves the output as the poisoned allocator
    made it. There is no driver-level second opinion (hook_installed stays False): a program run
    around the wrappers is not counted, so it fails the count, or escapes the ghost and fails the
    no-op swap.
    """

    launches: int = 0
    driver_launches: int = 0
    kernels: set[str] = field(default_factory=set)
    ghost: bool = False
    originals: dict[str, Callable] = field(default_factory=dict)
    hook_installed: bool = False

    def install(self) -> None:
        # cutlass (~2 s) only for a CuTe task
        from cutlass.base_dsl.jit_executor import JitCompiledFunction, JitExecutor

        orig = JitExecutor.run_compiled_program
        self.originals["JitExecutor.run_compiled_program"] = orig
        first = JitCompiledFunction.run_compiled_program
        self.originals["JitCompiledFunction.run_compiled_program"] = first
        counter = self

        def first_run(fn: Any, exe_args: Any) -> Any:
            # A compiled function's first run makes its executor (loading the module) and goes on
            # into JitExecutor.run_compiled_program, counted there; a ghost run stops here.
            if counter.ghost:
                counter.launches += 1
                counter.kernels.add(_cute_name(fn))
                return None
            return first(fn, exe_args)

        first_run.__wrapped__ = first  # type: ignore[attr-defined]
        JitCompiledFunction.run_compiled_program = first_run  # type: ignore[method-assign]

        def run_compiled_program(executor: Any, exe_args: Any) -> Any:
            counter.launches += 1
            counter.kernels.add(_cute_name(getattr(getattr(executor, "jit_module", None), "execution_args", None)))
            if counter.ghost:
                # What the real call returns on success (a CUDA status, or None without one).
                return None if getattr(executor, "cuda_result", None) is None else 0
            return orig(executor, exe_args)

        run_compiled_program.__wrapped__ = orig  # type: ignore[attr-defined]
        JitExecutor.run_compiled_program = run_compiled_program  # type: ignore[method-assign]

    def reset(self) -> None:
        self.launches = 0
        self.driver_launches = 0
        self.kernels = set()


def _cute_name(obj: Any) -> str:
    """The @cute.jit function's name a compiled program came from (for the verdict's kernel list)."""
    return "cute:" + str(getattr(obj, "function_name", None) or "compiled program")


def launch_counter(dsl: str) -> "LaunchCounter | CuteLaunchCounter":
    """The counter for a task's DSL, installed: a CuTe task's launches are its compiled programs'
    (a Triton launch there is not the task's DSL at work); Triton's for every other DSL."""
    c: LaunchCounter | CuteLaunchCounter = CuteLaunchCounter() if dsl == "cute" else LaunchCounter()
    c.install()
    return c


def wrap_manual_seed_as_dynamo_does() -> None:
    """Importing torch._dynamo replaces torch.manual_seed with a dynamo-disable wrapper, and candidate
    code may import it (torch.library.triton_op does): that would read as a patch of a function the
    harness relies on. Do the same wrapping first, before the identity snapshot, without importing
    dynamo (about 1.2 s of a child's start): the wrapper's first call imports dynamo unless the raw
    function carries its own disabled form, so it carries itself (nothing here is compiled). Dynamo,
    imported later, sees manual_seed already wrapped and leaves it. The cached attribute is in the
    identity snapshot. A torch without `_disable_dynamo` is left as it is."""
    import torch  # (child start-up: torch loads after this module, in the timed preload)

    raw = getattr(torch.random, "manual_seed", None)
    if raw is None or torch.manual_seed is not raw or not hasattr(torch, "_disable_dynamo"):
        return
    setattr(raw, "__dynamo_disable", raw)
    torch.manual_seed = torch._disable_dynamo(raw)


def identity_snapshot(extra: dict[str, Any] | None = None) -> dict[str, int]:
    """id() of every function the harness relies on: torch's API, timers, the channel, builtins.

    Reassigning any of them (a candidate patching torch.softmax, Event.elapsed_time,
    time.perf_counter, torch.allclose...) changes an id and is caught by `changed_identities`.
    """
    # (Imported inside the guards: child.py imports this module first thing, before it reads its
    # channel key; torch and triton come later, in its preload, timed as start-up phases.)
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
                     "harness.evaluate.child", "harness.authoring.contract"):
        mod = sys.modules.get(mod_name)
        if mod is not None:
            take(mod_name, mod)
            for cname in dir(mod):
                c = getattr(mod, cname)
                if isinstance(c, type) and c.__module__ == mod_name:
                    take(f"{mod_name}.{cname}", c)
    seed = getattr(torch.random, "manual_seed", None)
    snap["torch.random.manual_seed.__dynamo_disable"] = id(getattr(seed, "__dynamo_disable", None))
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
    import torch  # child start-up: torch/triton load after this module, in the timed preload

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
    import torch  # child start-up: torch/triton load after this module, in the timed preload

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


FILL_KINDS = ("pattern", "values", "zeros")


def fill_allocator(fill: dict, nbytes: int, device: str, dtype: Any) -> None:
    """Leave the allocator's free memory holding what `fill` says, so torch.empty returns it.

    `fill` comes from the parent, drawn per evaluation from its secret (correctness.fill_for):
    {"kind": "pattern", "word": w} tiles a 32-bit word whose every 2-byte half has a high byte of 0x7F
    or 0xFF, so an element a call never writes is NaN, Inf or at least 1.7e38 in bf16, fp16 and fp32
    (and far out of range as an index): it shows up in the comparison; {"kind": "values", "seed": s}
    is what a user's process reuses, earlier tensors' values (normal draws in the task's dtype);
    {"kind": "zeros"} is fresh pages. No fixed pattern marks a checked call: the word changes with
    every evaluation and some checked calls get a user's kind of memory.

    On CUDA the caching allocator keeps freed blocks: empty the cache, then allocate, fill and free
    blocks that cover what the call will ask for (large and small pools). On CPU, glibc reuses
    freed chunks of the same size; blocks of the output's exact size and a few multiples catch the
    common cases (best effort: fresh mmap'd pages read as zeros, which fail correctness anyway).
    """
    import torch  # child start-up: torch/triton load after this module, in the timed preload

    kind = fill.get("kind")
    if kind not in FILL_KINDS:
        raise ValueError(f"unknown allocator fill {fill!r}")
    nbytes = -(-max(int(nbytes), 1 << 12) // 8) * 8  # whole words of any element size
    sizes = (nbytes * 4, nbytes, nbytes) if device == "cuda" else (nbytes, nbytes, nbytes * 2, nbytes * 4)
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    g = torch.Generator(device=device).manual_seed(int(fill.get("seed", 0))) if kind == "values" else None
    blocks = [torch.empty(size, dtype=torch.uint8, device=device) for size in sizes]
    if device == "cuda":
        blocks += [torch.empty(1 << 19, dtype=torch.uint8, device="cuda") for _ in range(16)]  # small pool
    for b in blocks:
        if kind == "pattern":
            word = int(fill["word"]) & 0xFFFFFFFF
            b.view(torch.int32).fill_(word - (1 << 32) if word >= 1 << 31 else word)
        elif kind == "values":
            el = torch.empty((), dtype=dtype).element_size()
            b[: b.numel() // el * el].view(dtype).normal_(generator=g)
        else:
            b.zero_()
    if device == "cuda":
        torch.cuda.synchronize()
    del blocks


# -- torch-compute at run time -------------------------------------------------------------------
# The static `torch-compute` rule reads names, so torch work behind operators (`math.e ** x`, `a / b`),
# builtins (`sum(t)`) or values pulled into Python (`.tolist()`, `.numpy()`) is invisible to it, and a
# Triton kernel that only copies the finished result passes the no-op swap (the output does depend on
# the copy). At run time every torch op is seen whatever the spelling: aten ops that only allocate,
# fill, copy, cast, view or query are what the rule allows; any other aten/prims op during a
# correctness call is torch computing. Other namespaces (a CUDA extension's own ops) are the DSL's.
# A torch.library custom op implemented in Python runs its aten ops inside this mode's handler,
# where the mode is off, so they are not seen: such an op counts as torch compute itself, unless
# it is a torch.library.triton_op (a registered wrapper of Triton kernels).
TORCH_NONCOMPUTE_OPS = frozenset("""
empty empty_like empty_strided new_empty new_empty_strided zeros zeros_like new_zeros ones ones_like
new_ones full full_like new_full arange scalar_tensor lift lift_fresh lift_fresh_copy fill fill_ zero_
copy copy_ _copy_from _copy_from_and_resize clone _to_copy to contiguous detach detach_ alias set_ resize_
resize_as_ _pin_memory record_stream view _unsafe_view reshape _reshape_alias as_strided t transpose
permute expand expand_as slice select unsqueeze squeeze narrow split split_with_sizes unbind chunk
flatten unflatten view_as view_as_real view_as_complex movedim swapaxes _conj _neg_view _local_scalar_dense
is_nonzero sym_size sym_stride sym_numel sym_storage_offset size stride dim numel is_contiguous
storage_offset is_same_size _has_compatible_shallow_copy_type _to_dlpack _nested_tensor_size
""".split())
# Tensor methods that hand values to Python or numpy (DLPack: np.from_dlpack), where no torch op can
# see what is done with them.
TORCH_TO_PYTHON = frozenset({"numpy", "tolist", "__array__", "__dlpack__", "untyped_storage", "storage",
                             "_typed_storage"})
PYTHON_VALUES_LIMIT = 1024   # elements a call may read into Python (a few sizes or offsets: fine)


@dataclass(frozen=True)
class WatchSettings:
    """What the torch-compute watch permits, frozen into it when the child starts, before any
    candidate code runs. The module-level names above are read only then: candidate code that
    replaces them (enum.global_enum wrote members into this very module) changes nothing the watch
    reads, and the replacement shows as harness-patched (the identity snapshot covers them). The
    child reports digest() at import and the parent compares it with the one it computes from its
    own copy of this module. A hint still (docs/threat-model.md): the frozen object lives in the
    candidate's process, reachable through the object graph."""

    noncompute_ops: frozenset[str]
    to_python: frozenset[str]
    python_values_limit: int

    def digest(self) -> str:
        text = "\n".join([*sorted(self.noncompute_ops), "--", *sorted(self.to_python), "--", str(self.python_values_limit)])
        return hashlib.sha256(text.encode()).hexdigest()


def watch_settings() -> WatchSettings:
    """The settings as this module defines them (copies: nothing later rebinding a name reaches them)."""
    return WatchSettings(frozenset(TORCH_NONCOMPUTE_OPS), frozenset(TORCH_TO_PYTHON), int(PYTHON_VALUES_LIMIT))


def _called_from_dsl() -> bool:
    """Is the nearest caller outside torch a DSL's own package (Triton's interpreter reads kernel
    arguments through numpy; CuTe takes tensors through DLPack)? Asked only for to-Python calls."""
    import torch  # child start-up: torch/triton load after this module, in the timed preload

    # The installed packages' own files only (not any path that merely contains "triton").
    torch_dir = os.path.dirname(torch.__file__) + os.sep
    dsl_dirs = tuple(os.path.dirname(m.__file__) + os.sep for m in (sys.modules.get(n) for n in ("triton", "cutlass"))
                     if m is not None and getattr(m, "__file__", None))
    f = sys._getframe(2)
    while f is not None and (f.f_code.co_filename.startswith(torch_dir) or f.f_code.co_filename == __file__):
        f = f.f_back
    return f is not None and f.f_code.co_filename.startswith(dsl_dirs)


def _triton_op_body(func: Any) -> Callable | None:
    """The Python body of a torch.library.triton_op (what torch registers as its fake kernel and
    decomposes into under FunctionalTensorMode), or None for any other op."""
    try:
        qualname = func._schema.name
        # child start-up: torch/triton load after this module, in the timed preload
        from torch._library.custom_ops import OPDEFS
        from torch._library.triton import triton_ops_to_kernels
    except Exception:  # noqa: BLE001 - private torch modules moved: say nothing rather than guess
        return None
    if qualname not in triton_ops_to_kernels or qualname not in OPDEFS:
        return None
    return getattr(OPDEFS[qualname], "_abstract_fn", None)


def _python_custom_op(func: Any) -> bool:
    try:
        qualname = func._schema.name  # "ns::name"
        from torch._library.custom_ops import OPDEFS
        from torch._library.triton import triton_ops_to_kernels
        import torch.library as tlib
    except Exception:  # noqa: BLE001 - private torch modules moved: say nothing rather than guess
        return False
    if qualname in triton_ops_to_kernels:
        return False
    # torch.library.Library.impl records "ns/name/dispatch_key" for each Python kernel it registers.
    prefix = qualname.replace("::", "/") + "/"
    return qualname in OPDEFS or any(k.startswith(prefix) for k in getattr(tlib, "_impls", ()))


class TorchComputeWatch:
    """Records torch compute during one call (a dispatch mode for aten ops, a function mode for
    values leaving torch). Use as a context manager around the entry call only."""

    def __init__(self, settings: WatchSettings | None = None) -> None:
        # child start-up: torch/triton load after this module, in the timed preload
        from torch.overrides import TorchFunctionMode
        from torch.utils._python_dispatch import TorchDispatchMode

        watch = self
        # Read from the settings the child froze at its start (WatchSettings), never from this module's
        # names at call time: candidate code has run by then.
        self.settings = settings if settings is not None else watch_settings()
        noncompute, to_python_fns = self.settings.noncompute_ops, self.settings.to_python
        self.ops: dict[str, int] = {}
        self.to_python = 0   # elements read into Python/numpy

        class _Dispatch(TorchDispatchMode):
            @classmethod
            def _should_skip_dynamo(cls) -> bool:
                # torch wraps a mode's __torch_dispatch__ in a dynamo-disable shim that imports
                # torch._dynamo on the first op (about 1.2 s of every child's start). The shim only
                # matters when dynamo is loaded (then we keep it); the entry call has no torch.compile
                # to protect otherwise. A torch without this hook ignores it.
                return "torch._dynamo" in sys.modules

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                packet = getattr(func, "overloadpacket", None)
                name = getattr(packet, "__name__", str(func))
                ns = getattr(func, "namespace", "aten")
                if name == "_local_scalar_dense":
                    watch.to_python += 1
                elif ns in ("aten", "prims") and name not in noncompute:
                    watch.ops[f"{ns}.{name}"] = watch.ops.get(f"{ns}.{name}", 0) + 1
                elif ns not in ("aten", "prims") and _python_custom_op(func):
                    watch.ops[f"{ns}.{name} (a custom op implemented in Python)"] = 1
                elif ns not in ("aten", "prims"):
                    body = _triton_op_body(func)
                    if body is not None:
                        # A triton_op runs its body with this mode off, so torch work in it (a softmax
                        # beside a staging-copy kernel) would go unseen: run the body here, watched, as
                        # torch itself does under FunctionalTensorMode; its launches are plain launches.
                        from torch._library.triton import set_wrap_triton_enabled

                        with self, set_wrap_triton_enabled(False):
                            return body(*args, **(kwargs or {}))
                return func(*args, **(kwargs or {}))

        class _Function(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
                if getattr(func, "__name__", "") in to_python_fns and args and not _called_from_dsl():
                    t = args[0]
                    watch.to_python += t.numel() if hasattr(t, "numel") else watch.settings.python_values_limit + 1
                return func(*args, **(kwargs or {}))

        self._modes = [_Function(), _Dispatch()]

    def __enter__(self) -> "TorchComputeWatch":
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for m in reversed(self._modes):
            m.__exit__(*exc)

    def findings(self) -> list[str]:
        out = []
        if self.ops:
            top = sorted(self.ops.items(), key=lambda kv: -kv[1])[:8]
            out.append("torch computed during the call (" + ", ".join(f"{k} x{n}" for k, n in top) + "); "
                       "operators and builtins on tensors are torch ops too: compute the result in your kernel")
        if self.to_python > self.settings.python_values_limit:
            out.append(f"the call read {self.to_python} tensor values into Python/numpy (.tolist(), .numpy(), DLPack, "
                       ".item()...); compute the result in your kernel")
        return out


# -- introspection at run time --------------------------------------------------------------------
# Candidate code runs in the child's process, so with the object graph (gc, frames) it can reach the
# channel's Endpoint, the launch counter or any guard and doctor what the child reports. The static
# rule no-introspection forbids the imports, but modules re-export gc (`triton.testing.gc`) and
# frames come from exceptions (`getattr(e, "__traceback__")`). Audit events fire whatever the
# spelling; the hook (permanent once added) notes those whose immediate caller is candidate code.
AUDITED_EVENTS = frozenset({"gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._getframe",
                            "sys._current_frames", "sys.settrace", "sys.setprofile", "object.__getattr__",
                            "object.__setattr__", "object.__delattr__", "sys.addaudithook",
                            "code.__new__", "function.__new__"})


class IntrospectionWatch:
    def __init__(self) -> None:
        self.files: set[str] = set()   # real paths of imported candidate files
        self.seen: list[str] = []
        self._busy = False
        self._real: dict[str, str] = {}

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def watch_file(self, path: str) -> None:
        self.files.add(os.path.realpath(path))

    def take(self) -> list[str]:
        out, self.seen = list(dict.fromkeys(self.seen)), []
        return out

    def _hook(self, event: str, args: tuple) -> None:
        if self._busy or not self.files or not (event in AUDITED_EVENTS or event.startswith("ctypes.")):
            return
        self._busy = True  # sys._getframe below raises its own audit event
        try:
            f = sys._getframe(1)
            fn = f.f_code.co_filename
            real = self._real.get(fn)
            if real is None:
                real = self._real[fn] = os.path.realpath(fn)
            if real in self.files:
                what = f"{event}({args[1]!r})" if event.startswith("object.") and len(args) > 1 else event
                self.seen.append(f"{what} at {os.path.basename(fn)}:{f.f_lineno}")
        finally:
            self._busy = False


def instance_overrides(obj: Any) -> list[str]:
    """Names a harness object has on the instance that shadow a method of its class."""
    try:
        own = vars(obj)
    except TypeError:
        return []
    return sorted(k for k in own if callable(inspect.getattr_static(type(obj), k, None)))

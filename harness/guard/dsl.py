"""Static checks that a candidate really is written in its task's DSL and really launches it.

Each check has an id (STATIC_CHECKS); rules packs name them with `check = "<id>"`, so the rule's
message (what the agent is told) lives in the pack, and the analysis lives here.

What is read, per DSL:
  triton  @triton.jit kernels (also under @triton.autotune / @triton.heuristics, or triton.jit(f))
          that use triton.language; launched as `kernel[grid](...)` (or `kernel.run`).
  cute    @cute.kernel functions launched with `.launch(...)` from a @cute.jit function; the entry
          calls a @cute.jit function or what cute.compile(...) returned.
  cuda    a CUDA C++ string with a `__global__` kernel and a `<<<...>>>` launch, compiled with
          torch.utils.cpp_extension.load_inline/load; the entry calls a function of that module.

The entry path is the entry function plus every module function it can reach (call graph within
the module: calls, references such as `map(helper, ...)`, classes instantiated, methods by name,
module-level values it names such as `_f = lambda t: ...` or `_g = functools.partial(...)`, and
whatever stores into a name it reads: `_OPS["f"] = ...`, `_OPS.update(...)`, a function filling a
table, a name bound inside a module-level `if`/`try`/`for`; ModuleModel.module_writes), each
read whole: default arguments, annotations and decorators included. DSL kernel bodies are device
code and are not part of it. Names are found by a regex over each function's text, so a name in a
string or comment also counts: that only adds functions to the path (sound, never hides one).

Limits (sound but simple, on purpose):
  * The launch rule asks for a live launch of one of the module's kernels on the entry path (a
    method, a class attribute, a torch.library.triton_op reached as torch.ops.<ns>.<op>, a loop
    body), not in dead code (`if False:`, after a return). Whether every path launches is left to
    the runtime proof (dsl-kernel-runs: launches seen on every checked shape, output wrong when they
    are no-ops): a per-path rule refused honest code (launcher methods, triton_ops, chunk loops, an
    early return for empty inputs). cute and cuda keep the per-path rule (`launches_always`).
  * Values are not tracked: torch work hidden behind arithmetic operators on tensors (`x * y`) is
    not visible here; the runtime check `dsl-kernel-runs` (no-op swap) catches it.
  * Method calls on objects of unknown type are judged by name against TENSOR_COMPUTE_METHODS
    (`list.sort`/`set.add` are left out of it, so `x.sort()` on a tensor is not seen here).
  * Class attributes (`class A: f = torch.exp`) are followed (a reference to the class or `.f`);
    objects built by other modules are not, which is why the allowlist (allow.py) judges every name
    reached from an import wherever it appears, not only on the entry path.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from tree_sitter import Node

from .allow import own_ops
from .state import check_module_state
from .pyparse import Function, ModuleModel, root_identifier, string_value, text, walk


@dataclass
class Finding:
    node: Node
    detail: str = ""


STATIC_CHECKS: dict[str, str] = {
    "entry-defined": "the task's entry is a plain `def` at module level, bound once",
    "triton-kernel": "the module defines a @triton.jit kernel that uses triton.language",
    "triton-launch": "the entry launches a @triton.jit kernel on every path that returns",
    "cute-kernel": "a @cute.kernel is launched with .launch() from a @cute.jit function",
    "cute-launch": "the entry calls a @cute.jit function (or its cute.compile result) on every path that returns",
    "cuda-kernel": "a CUDA source string with a __global__ kernel and a <<<>>> launch is compiled with load_inline/load",
    "cuda-launch": "the entry calls a function of the compiled extension on every path that returns",
    "cuda-source-compute": "the CUDA/C++ source calls no torch/ATen compute or vendor library (cuBLAS, cuDNN, thrust...)",
    "torch-compute": "torch on the entry path is limited to allocation, queries, views and contiguous",
    "foreign-call": "the entry path calls nothing outside the candidate but torch (allowlisted), the DSL and small stdlib helpers",
    "dynamic-lookup": "no eval/exec/compile/__import__/importlib/globals()/vars(), getattr with a computed name or star imports",
    "no-module-state": "nothing on the entry path writes state that outlives a call (but a memo cache of compiled "
                       "kernels/configs and a diagnostic the path never reads); harness/guard/state.py",
}

# -- torch allowlist on the entry path ------------------------------------------------------
_DTYPES = {
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "int8", "int16", "short",
    "int32", "int", "int64", "long", "uint8", "uint16", "uint32", "uint64", "bool", "complex64",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn_x2",
}
TORCH_ALLOWED: frozenset[str] = frozenset(
    {f"torch.{d}" for d in _DTYPES}
    | {f"torch.{n}" for n in (
        "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like", "full",
        "full_like", "arange", "tensor", "Tensor", "Size", "dtype", "device", "finfo", "iinfo",
        "is_tensor", "is_floating_point", "get_default_dtype", "numel", "no_grad", "inference_mode",
        "contiguous_format", "strided",
    )}
    | {f"torch.cuda.{n}" for n in (
        "current_device", "device", "get_device_properties", "get_device_capability", "get_device_name",
        "device_count", "is_available", "current_stream", "default_stream", "device_of",
    )}
    # registering a Triton kernel as a torch op (its body is on the entry path, read like the rest)
    | {"torch.library.triton_op", "torch.library.wrap_triton"}
)
TORCH_ALLOWED_PREFIXES = ("torch.version.", "torch.utils.dlpack.")
# Per-DSL extras: the compile entry points the DSL itself needs.
_TORCH_ALLOWED_BY_DSL = {
    "cuda": frozenset({"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}),
}

# Tensor methods that compute (by name: the receiver's type is unknown statically). Views, casts,
# allocation (`new_empty`), `zero_`/`fill_`/`copy_` and queries are not here.
_COMPUTE = """
abs absolute acos acosh addbmm addcdiv addcmul addmm addmv addr all amax amin aminmax any argmax
argmin argsort asin asinh atan atan2 atanh baddbmm bincount bitwise_and bitwise_not bitwise_or
bitwise_xor bmm cauchy_ ceil cholesky clamp clamp_max clamp_min clip cos cosh count_nonzero cross
cummax cummin cumprod cumsum deg2rad diag diag_embed diagonal_scatter diff digamma dist div divide
dot eig einsum eq equal erf erfc erfinv exp exp2 expm1 exponential_ floor floor_divide fmax fmin
fmod frac gather gcd ge geometric_ gelu ger greater greater_equal gt heaviside histc hypot i0
index_add index_copy index_fill index_put index_reduce index_select inner inverse isclose isfinite
isinf isnan kron kthvalue lcm ldexp le lerp less less_equal lgamma log log10 log1p log2 log_normal_
log_softmax logaddexp logaddexp2 logcumsumexp logdet logical_and logical_not logical_or
logical_xor logit logsumexp lt lu masked_fill masked_scatter masked_select matmul matrix_exp
matrix_power max maximum mean median min minimum mm mode msort mul multinomial multiply mv mvlgamma
nan_to_num nanmean nanmedian nanquantile nansum ne neg negative nextafter nonzero norm normal_
not_equal outer pinverse polygamma pow prod put_ qr quantile rad2deg random_ reciprocal relu
remainder renorm repeat_interleave roll rot90 round rsqrt scatter scatter_add scatter_reduce
searchsorted sgn sigmoid sign signbit sin sinc sinh slogdet softmax sqrt square std sub subtract sum
svd take take_along_dim tan tanh tensordot topk trace triangular_solve tril triu true_divide trunc
uniform_ unique unique_consecutive var vdot where xlogy apply_ map_ __matmul__ __mul__ __add__
""".split()
TENSOR_COMPUTE_METHODS: frozenset[str] = frozenset(_COMPUTE) | frozenset(
    f"{m}_" for m in _COMPUTE if not m.endswith("_") and not m.startswith("__")
)

# Roots a call on the entry path may resolve to (besides torch, judged by its allowlist).
_SAFE_ROOTS = {"math", "functools", "itertools", "typing", "dataclasses", "collections",
               "enum", "numbers", "warnings", "logging", "builtins"}
_ROOTS_BY_DSL = {"triton": {"triton"}, "cute": {"cutlass", "cuda"}, "cuda": set()}
_DANGEROUS_BUILTINS = {"builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__",
                       "builtins.globals", "builtins.locals", "builtins.vars", "builtins.open",
                       "builtins.input", "builtins.breakpoint", "builtins.setattr", "builtins.delattr"}

_TRITON_JIT = {"triton.jit", "triton.runtime.jit", "triton.runtime.jit.jit", "triton.runtime.jit.JITFunction"}
_TRITON_WRAPPERS = {"triton.autotune", "triton.heuristics", "triton.runtime.autotune",
                    "triton.runtime.autotuner.autotune", "triton.runtime.heuristics"}
_CUTE_KERNEL = {"cutlass.cute.kernel"}
_CUTE_JIT = {"cutlass.cute.jit"}
_CUTE_COMPILE = {"cutlass.cute.compile"}
_CPP_EXT = {"torch.utils.cpp_extension.load_inline", "torch.utils.cpp_extension.load"}

_NOT_UNCONDITIONAL = {"lambda", "conditional_expression", "list_comprehension", "set_comprehension",
                      "dictionary_comprehension", "generator_expression", "function_definition",
                      "class_definition"}


def _is_triton_kernel(model: ModuleModel, fn: Function) -> bool:
    return bool(model.decorator_qualnames(fn) & _TRITON_JIT)


def _decorated(model: ModuleModel, fn: Function, names: set[str]) -> bool:
    return bool(model.decorator_qualnames(fn) & names)


class DslModel:
    """What the checks share for one candidate: kernels, launch forms, the entry path."""

    def __init__(self, model: ModuleModel, dsl: str, entry: str):
        self.m, self.dsl, self.entry_name = model, dsl, entry
        fns = list(model.all_functions())
        self.triton_kernels = [f for f in fns if _is_triton_kernel(model, f)]
        self.cute_kernels = [f for f in fns if _decorated(model, f, _CUTE_KERNEL)]
        self.cute_jits = [f for f in fns if _decorated(model, f, _CUTE_JIT)]
        self.device_fns = {f.node.id for f in self.triton_kernels + self.cute_kernels + self.cute_jits}
        kernel_names = {f.name for f in self.triton_kernels}
        # triton.jit(f) / triton.autotune(...)(triton.jit(f)) used as values.
        for n in model.nodes("call"):
            if self._calls_any(n, _TRITON_JIT | _TRITON_WRAPPERS):
                args = n.child_by_field_name("arguments")
                for a in (args.named_children if args is not None else []):
                    if a.type == "identifier":
                        for f in model.functions.get(text(a), []):
                            if f.node.id not in self.device_fns:
                                self.triton_kernels.append(f)
                                self.device_fns.add(f.node.id)
                            kernel_names.add(f.name)
        self.kernel_names = kernel_names
        self._handles: set[str] = set()           # names holding a compiled DSL object
        self._handle_dicts: set[str] = set()      # containers of them
        self._providers: set[int] = set()         # functions returning one
        # torch.ops.<ns>.<op> the module registers itself ("ns.op"): a triton_op("ns::op"), or a
        # compiled extension's TORCH_LIBRARY block (harness/guard/allow.py: own_ops)
        self._ext_ops: set[str] = own_ops(model)
        self._fixpoint_handles()
        self._always_memo: dict[int, bool] = {}
        self._in_progress: set[int] = set()
        self._kernel_aliases: set[str] = set()
        self._kernel_containers: set[str] = set()
        self._launchers: set[str] = set()

    # -- helpers ----------------------------------------------------------------------------
    def _calls_any(self, call: Node, names: set[str]) -> bool:
        fn = call.child_by_field_name("function")
        if fn is None:
            return False
        if fn.type == "call":  # triton.autotune(...)(f)
            return self._calls_any(fn, names)
        return bool(self.m.qualnames(fn) & names)

    def entry_functions(self) -> list[Function]:
        return self.m.functions.get(self.entry_name, [])

    def entry_path(self) -> list[Function]:
        stop = lambda f: f.node.id in self.device_fns  # noqa: E731
        path = self.m.reachable(self.entry_functions(), stop=stop)
        # A kernel's decorators name host code that runs at its launches (a Config's pre_hook, an
        # autotune hook): the functions they name are on the path too (a pre_hook that computed the
        # softmax with torch beside a staging-copy kernel passed as off the path). The decorator
        # expressions themselves are scanned with their kernel (Function.scanned).
        hooks = [Function(f"{f.name}@decorator", d, []) for f in path if stop(f) for d in f.decorators]
        if hooks:
            seen = {f.node.id for f in path} | {h.node.id for h in hooks}
            path += [f for f in self.m.reachable(hooks, stop=stop) if f.node.id not in seen]
        return path

    def host_path(self) -> list[Function]:
        """Entry path without DSL device/jit functions (where torch rules apply)."""
        return [f for f in self.entry_path() if f.node.id not in self.device_fns]

    # -- compiled handles (cute.compile results, cpp_extension modules) ----------------------
    def _handle_ctor(self) -> set[str]:
        return _CUTE_COMPILE if self.dsl == "cute" else _CPP_EXT if self.dsl == "cuda" else set()

    def is_handle(self, e: Node | None) -> bool:
        if e is None:
            return False
        t = e.type
        if t == "parenthesized_expression" and e.named_children:
            return self.is_handle(e.named_children[0])
        if t in ("boolean_operator", "conditional_expression"):  # `cache.get(k) or cute.compile(...)`
            return any(self.is_handle(c) for c in e.named_children)
        if t == "identifier":
            return text(e) in self._handles
        if t == "subscript":
            v = e.child_by_field_name("value")
            return v is not None and v.type == "identifier" and text(v) in self._handle_dicts
        if t == "call":
            fn = e.child_by_field_name("function")
            if fn is None:
                return False
            if self.m.qualnames(fn) & self._handle_ctor():
                return True
            if fn.type == "attribute" and text(fn.child_by_field_name("attribute")) in ("get", "setdefault"):
                obj = fn.child_by_field_name("object")
                return obj is not None and obj.type == "identifier" and text(obj) in self._handle_dicts
            if fn.type == "identifier":
                return any(f.node.id in self._providers for f in self.m.functions.get(text(fn), []))
        return False

    def _fixpoint_handles(self) -> None:
        if not self._handle_ctor():
            return
        assigns = self.m.nodes("assignment")
        returns = self.m.nodes("return")
        for _ in range(6):
            before = (len(self._handles), len(self._handle_dicts), len(self._providers))
            for a in assigns:
                left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
                if left is None or not self.is_handle(right):
                    continue
                if left.type == "identifier":
                    self._handles.add(text(left))
                elif left.type == "subscript":
                    v = left.child_by_field_name("value")
                    if v is not None and v.type == "identifier":
                        self._handle_dicts.add(text(v))
            for r in returns:
                if r.named_children and self.is_handle(r.named_children[0]):
                    f = self.m.enclosing_function(r)
                    if f is not None:
                        self._providers.add(f.node.id)
            # lru_cache-style providers: a function whose return is a handle-producing call.
            if (len(self._handles), len(self._handle_dicts), len(self._providers)) == before:
                break

    # -- launches ---------------------------------------------------------------------------
    def _is_kernel_ref(self, e: Node | None) -> bool:
        if e is None:
            return False
        if e.type == "identifier":
            name = text(e)
            return name in self.kernel_names or name in self._kernel_aliases
        if e.type == "subscript":  # KERNELS[key][grid](...)
            v = e.child_by_field_name("value")
            return v is not None and v.type == "identifier" and text(v) in self._kernel_containers
        if e.type == "attribute":  # self._kernel / module-level kernel through a namespace
            return text(e.child_by_field_name("attribute")) in self.kernel_names
        if e.type == "call":  # torch.library.wrap_triton(kernel)[grid](...) inside a triton_op
            fn = e.child_by_field_name("function")
            args = e.child_by_field_name("arguments")
            pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
            return fn is not None and "torch.library.wrap_triton" in self.m.qualnames(fn) \
                and bool(pos) and self._is_kernel_ref(pos[0])
        return False

    def _collect_triton_aliases(self) -> None:
        self._kernel_aliases, self._kernel_containers, self._launchers = set(), set(), set()
        assigns = self.m.nodes("assignment")
        for _ in range(4):
            size = len(self._kernel_aliases) + len(self._kernel_containers) + len(self._launchers)
            for a in assigns:
                left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
                if left is None or right is None or left.type != "identifier":
                    continue
                name = text(left)
                if self._is_kernel_ref(right):
                    self._kernel_aliases.add(name)
                elif right.type == "subscript" and self._is_kernel_ref(right.child_by_field_name("value")):
                    self._launchers.add(name)
                elif right.type in ("dictionary", "list", "tuple") and any(
                        self._is_kernel_ref(c) or (c.type == "pair" and self._is_kernel_ref(c.child_by_field_name("value")))
                        for c in right.named_children):
                    self._kernel_containers.add(name)
            if len(self._kernel_aliases) + len(self._kernel_containers) + len(self._launchers) == size:
                break

    def is_launch(self, call: Node) -> bool:
        """Does this call node launch a kernel of the DSL directly?"""
        fn = call.child_by_field_name("function")
        if fn is None:
            return False
        if self.dsl == "triton":
            if fn.type == "subscript":
                return self._is_kernel_ref(fn.child_by_field_name("value"))
            if fn.type == "attribute" and text(fn.child_by_field_name("attribute")) == "run":
                return self._is_kernel_ref(fn.child_by_field_name("object"))
            if "functools.partial" in self.m.qualnames(fn):
                # functools.partial(kernel[grid], ...): a launcher handed on (returned by a method, called
                # later); whether it really runs is the runtime proof's business (dsl-kernel-runs).
                args = call.child_by_field_name("arguments")
                first = next((a for a in (args.named_children if args is not None else []) if a.type != "comment"), None)
                if first is not None and first.type == "subscript":
                    return self._is_kernel_ref(first.child_by_field_name("value"))
                if first is not None and first.type == "attribute" and text(first.child_by_field_name("attribute")) == "run":
                    return self._is_kernel_ref(first.child_by_field_name("object"))
                return False
            return fn.type == "identifier" and text(fn) in self._launchers
        if self.dsl == "cute":
            if fn.type == "identifier" and any(f.name == text(fn) for f in self.cute_jits):
                return True
            if fn.type == "attribute" and any(f.name == text(fn.child_by_field_name("attribute")) for f in self.cute_jits):
                return True
            return self.is_handle(fn)
        if self.dsl == "cuda":
            if fn.type == "attribute":
                obj = fn.child_by_field_name("object")
                if self.is_handle(obj):
                    return True
                for q in self.m.qualnames(fn):
                    parts = q.split(".")
                    if len(parts) >= 4 and parts[:2] == ["torch", "ops"] and f"{parts[2]}.{parts[3]}" in self._ext_ops:
                        return True
        return False

    def dead(self, node: Node, fn: Function) -> bool:
        """Is `node` in code of `fn` that never runs: after a return/raise in its block, or in a branch
        whose condition folds to a constant that skips it?"""
        child, p = node, node.parent
        while p is not None and p != fn.node:
            if p.type == "block":
                for sib in p.named_children:
                    if sib == child or sib.start_byte >= child.start_byte:
                        break
                    if sib.type in ("return_statement", "raise_statement"):
                        return True
            if p.type == "if_statement" and child == p.child_by_field_name("consequence"):
                if self.const_value(p.child_by_field_name("condition")) is False:
                    return True
            if p.type == "elif_clause" and child == p.child_by_field_name("consequence"):
                if self.const_value(p.child_by_field_name("condition")) is False:
                    return True
            if p.type in ("else_clause", "elif_clause") and p.parent is not None and p.parent.type == "if_statement":
                if self.const_value(p.parent.child_by_field_name("condition")) is True:
                    return True
            child, p = p, p.parent
        return False

    def launches_always(self, fn: Function) -> bool:
        """Every path through `fn` (each return, and its end) passes a launch."""
        key = fn.node.id
        if key in self._always_memo:
            return self._always_memo[key]
        if key in self._in_progress:
            return False  # recursion: don't assume
        self._in_progress.add(key)
        misses: list[Finding] = []
        end = self.analyze_block(fn.body, False, misses)
        self._in_progress.discard(key)
        ok = not misses and end is not False
        self._always_memo[key] = ok
        return ok

    def _stmt_launches(self, stmt: Node) -> bool:
        for n in self.m.nodes_in("call", stmt):
            if not self._unconditional(n, stmt):
                continue
            if self.is_launch(n):
                return True
            fn = n.child_by_field_name("function")
            if fn is not None and fn.type == "identifier":
                for f in self.m.functions.get(text(fn), []) + self.m.nested.get(text(fn), []):
                    if f.node.id not in self.device_fns and self.launches_always(f):
                        return True
        return False

    @staticmethod
    def _unconditional(node: Node, stop: Node) -> bool:
        child, n = node, node.parent
        while n is not None and n != stop.parent:
            if n.type in _NOT_UNCONDITIONAL:
                return False
            if n.type == "boolean_operator" and n.child_by_field_name("right") == child:
                return False
            child, n = n, n.parent
        return True

    # -- constant folding of conditions ----------------------------------------------------------
    def const_value(self, e: Node | None) -> bool | None:
        if e is None:
            return None
        t = e.type
        if t == "true":
            return True
        if t in ("false", "none"):
            return False
        if t == "integer":
            try:
                return int(text(e).replace("_", ""), 0) != 0
            except ValueError:
                return None
        if t == "parenthesized_expression" and e.named_children:
            return self.const_value(e.named_children[0])
        if t == "not_operator":
            v = self.const_value(e.child_by_field_name("argument"))
            return None if v is None else not v
        if t == "boolean_operator":
            lv = self.const_value(e.child_by_field_name("left"))
            rv = self.const_value(e.child_by_field_name("right"))
            op = text(e.child_by_field_name("operator"))
            if op == "and":
                if lv is False or rv is False:
                    return False
                return True if lv and rv else None
            if lv is True or rv is True:
                return True
            return False if lv is False and rv is False else None
        if t == "identifier" and text(e) in self.m.module_constants:
            return self.const_value(self.m.module_constants[text(e)])
        if t == "comparison_operator":
            kids = e.named_children
            if len(kids) == 2 and all(k.type in ("integer", "float") for k in kids):
                ops = [text(c) for c in e.children if not c.is_named]
                if len(ops) == 1 and ops[0] in ("<", "<=", ">", ">=", "==", "!="):
                    try:
                        a, b = (float(text(k).replace("_", "")) for k in kids)
                    except ValueError:
                        return None
                    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[ops[0]]
        return None

    # -- path analysis ---------------------------------------------------------------------
    def analyze_block(self, block: Node | None, state: bool, misses: list[Finding]) -> bool | None:
        """Walk statements; return the launched-state at the end (None: end not reachable)."""
        if block is None:
            return state
        stmts = block.named_children if block.type in ("block", "module") else [block]
        cur: bool | None = state
        for s in stmts:
            if cur is None:
                break  # dead code after return/raise: launches there don't count
            cur = self._analyze_stmt(s, cur, misses)
        return cur

    def _join(self, results: list[bool | None]) -> bool | None:
        live = [r for r in results if r is not None]
        if not live:
            return None
        return all(live)

    def _analyze_stmt(self, s: Node, state: bool, misses: list[Finding]) -> bool | None:
        t = s.type
        if t == "return_statement":
            if not (state or self._stmt_launches(s)):
                misses.append(Finding(s, f"`{text(s)[:60]}` at line {s.start_point[0] + 1} "
                                         "is reached without a kernel launch on its path"))
            return None
        if t == "raise_statement":
            return None
        if t in ("function_definition", "class_definition", "decorated_definition", "comment"):
            return state
        if t == "if_statement":
            branches: list[bool | None] = []
            cond_val = self.const_value(s.child_by_field_name("condition"))
            pre = state or self._stmt_launches_expr(s.child_by_field_name("condition"), s)
            if cond_val is not False:
                branches.append(self.analyze_block(s.child_by_field_name("consequence"), pre, misses))
            if cond_val is True:
                return self._join(branches)
            has_else = False
            for alt in s.children_by_field_name("alternative"):
                if alt.type == "elif_clause":
                    v = self.const_value(alt.child_by_field_name("condition"))
                    if v is not False:
                        branches.append(self.analyze_block(alt.child_by_field_name("consequence"), pre, misses))
                    if v is True:
                        has_else = True
                        break
                elif alt.type == "else_clause":
                    has_else = True
                    branches.append(self.analyze_block(alt.child_by_field_name("body"), pre, misses))
            if not has_else:
                branches.append(pre)
            return self._join(branches)
        if t in ("for_statement", "while_statement"):
            body = s.child_by_field_name("body")
            runs_once = False
            if t == "for_statement":
                right = s.child_by_field_name("right")
                runs_once = self._range_nonempty(right)
            else:
                runs_once = False
            pre = state or (self._stmt_launches_expr(s.child_by_field_name("right"), s) if t == "for_statement" else False)
            inner = self.analyze_block(body, pre, misses)
            alt = s.child_by_field_name("alternative")
            if runs_once and inner is not None:
                return self.analyze_block(alt.child_by_field_name("body"), inner, misses) if alt else inner
            out = pre
            if alt is not None:
                out = self.analyze_block(alt.child_by_field_name("body"), pre, misses)
            return out
        if t == "try_statement":
            body = s.child_by_field_name("body")
            res = self.analyze_block(body, state, misses)
            branches = []
            else_clause = None
            finally_clause = None
            for c in s.named_children:
                if c.type == "except_clause" or c.type == "except_group_clause":
                    blk = next((b for b in c.named_children if b.type == "block"), None)
                    branches.append(self.analyze_block(blk, state, misses))
                elif c.type == "else_clause":
                    else_clause = c
                elif c.type == "finally_clause":
                    finally_clause = c
            if else_clause is not None and res is not None:
                res = self.analyze_block(else_clause.child_by_field_name("body"), res, misses)
            out = self._join([res] + branches)
            if finally_clause is not None and out is not None:
                blk = next((b for b in finally_clause.named_children if b.type == "block"), None)
                out = self.analyze_block(blk, out, misses)
            return out
        if t == "with_statement":
            pre = state
            for c in s.named_children:
                if c.type == "with_clause" and self._stmt_launches_expr(c, s):
                    pre = True
            return self.analyze_block(s.child_by_field_name("body"), pre, misses)
        if t == "match_statement":
            body = s.child_by_field_name("body")
            branches = [state]
            for case in (body.named_children if body is not None else []):
                if case.type == "case_clause":
                    blk = case.child_by_field_name("consequence")
                    branches.append(self.analyze_block(blk, state, misses))
            return self._join(branches)
        # simple statement (expression, assignment, assert, ...)
        return state or self._stmt_launches(s)

    def _stmt_launches_expr(self, e: Node | None, stmt: Node) -> bool:
        if e is None:
            return False
        for n in self.m.nodes_in("call", e):
            if self._unconditional(n, e) and self.is_launch(n):
                return True
        return False

    @staticmethod
    def _range_nonempty(right: Node | None) -> bool:
        if right is None or right.type != "call":
            return False
        fn = right.child_by_field_name("function")
        args = right.child_by_field_name("arguments")
        if fn is None or text(fn) != "range" or args is None:
            return False
        vals = args.named_children
        if len(vals) == 1 and vals[0].type == "integer":
            try:
                return int(text(vals[0]).replace("_", ""), 0) >= 1
            except ValueError:
                return False
        return False

    def prepare(self) -> "DslModel":
        if self.dsl == "triton":
            self._collect_triton_aliases()
        return self


# -- the checks -------------------------------------------------------------------------------
def _check_entry_defined(d: DslModel) -> list[Finding]:
    m, name = d.m, d.entry_name
    fns = m.functions.get(name, [])
    binds = m.module_bindings.get(name, [])
    if not fns:
        where = binds[0] if binds else m.root
        return [Finding(where, f"no module-level `def {name}(...)` found")]
    out = []
    if len(binds) > 1:
        for b in binds[1:]:
            out.append(Finding(b, f"`{name}` is bound {len(binds)} times at module level; the last binding wins"))
    for fn in fns:
        for dec in fn.decorators:
            target = dec.child_by_field_name("function") if dec.type == "call" else dec
            if not (target is not None and m.qualnames(target) & {"torch.no_grad", "torch.inference_mode"}):
                out.append(Finding(dec, f"`@{m.text(dec)}` on the entry: a decorator can replace the function"))
    return out


def _check_triton_kernel(d: DslModel) -> list[Finding]:
    if not d.triton_kernels:
        return [Finding(d.m.root, "no function decorated with @triton.jit")]
    for k in d.triton_kernels:
        for n in walk(k.body):
            if n.type in ("identifier", "attribute") and any(q.startswith("triton.language") for q in d.m.qualnames(n)):
                return []
    k = d.triton_kernels[0]
    return [Finding(k.node, f"@triton.jit `{k.name}` uses no triton.language operation")]


def _launch_findings(d: DslModel, what: str) -> list[Finding]:
    entries = d.entry_functions()
    if not entries:
        return []  # entry-defined reports it
    out: list[Finding] = []
    for fn in entries:
        misses: list[Finding] = []
        end = d.analyze_block(fn.body, False, misses)
        out += misses
        if end is False:
            last = fn.body.named_children[-1] if fn.body.named_children else fn.node
            out.append(Finding(last, f"`{fn.name}` can finish (falling off its end) without launching {what}"))
    return out


def _check_triton_launch(d: DslModel) -> list[Finding]:
    """A live launch of one of the module's @triton.jit kernels somewhere on the entry path.

    Not "on every path": the runtime proof (dsl-kernel-runs: launches seen on every checked shape,
    and the output wrong when they are made no-ops) is what shows the kernel computed the result,
    and a per-path rule refused honest code: a launcher method (`return self._impl(x)`), a
    torch.library.triton_op called through torch.ops, launches in a loop over row chunks, an early
    return for empty inputs. What the static stage still refuses: no launch at all, or launches
    only in dead code (`if False:`, after a return)."""
    entries = d.entry_functions()
    if not entries:
        return []  # entry-defined reports it
    for fn in d.host_path():
        if fn.stmt:
            continue  # module-level code that stores into a name the path reads: it runs once, at import
        for call in d.m.nodes_in("call", fn.body):
            if d.is_launch(call) and not d.dead(call, fn):
                return []
    fn = entries[0]
    return [Finding(fn.node, f"no live launch of a @triton.jit kernel is reachable from `{fn.name}` "
                             "(only dead code launches, or nothing does)")]


def _check_cute_kernel(d: DslModel) -> list[Finding]:
    if not d.cute_kernels:
        return [Finding(d.m.root, "no function decorated with @cute.kernel")]
    if not d.cute_jits:
        return [Finding(d.m.root, "no @cute.jit host function")]
    kernel_names = {k.name for k in d.cute_kernels}

    def kernel_call(e: Node | None) -> bool:
        if e is None or e.type != "call":
            return False
        callee = e.child_by_field_name("function")
        if callee is None:
            return False
        nm = d.m.text(callee.child_by_field_name("attribute")) if callee.type == "attribute" else d.m.text(callee)
        return nm in kernel_names

    for j in d.cute_jits:
        # `kernel(...).launch(...)`, or in two steps: `k = kernel(...)`, `k.launch(...)`
        objs = {d.m.text(a.child_by_field_name("left")) for a in d.m.nodes_in("assignment", j.body)
                if kernel_call(a.child_by_field_name("right"))}
        for n in d.m.nodes_in("call", j.body):
            fn = n.child_by_field_name("function")
            if fn is None or fn.type != "attribute" or d.m.text(fn.child_by_field_name("attribute")) != "launch":
                continue
            obj = fn.child_by_field_name("object")
            if kernel_call(obj) or (obj is not None and obj.type == "identifier" and d.m.text(obj) in objs):
                return []
    return [Finding(d.cute_jits[0].node, "no @cute.jit function calls `<kernel>(...).launch(...)` on a @cute.kernel")]


def _check_cute_launch(d: DslModel) -> list[Finding]:
    return _launch_findings(d, "a @cute.jit function or its cute.compile result")


_GLOBAL_RE = re.compile(r"__global__")
_LAUNCH_RE = re.compile(r"<<<|cudaLaunchKernel|cuLaunchKernel")


def _source_strings(d: DslModel) -> list[tuple[Node, str]]:
    out = []
    for n in d.m.nodes("string"):
        if n.parent is None or n.parent.type != "concatenated_string":
            v = string_value(n)
            if v is None:  # f-string: read the literal parts
                v = "".join(text(c) for c in walk(n) if c.type == "string_content")
            out.append((n, v))
    return out


def _check_cuda_kernel(d: DslModel) -> list[Finding]:
    strings = _source_strings(d)
    kernels = [n for n, v in strings if _GLOBAL_RE.search(v)]
    if not kernels:
        return [Finding(d.m.root, "no string with a `__global__` CUDA kernel")]
    if not any(_LAUNCH_RE.search(v) for _, v in strings):
        return [Finding(kernels[0], "the CUDA source never launches its kernel (`<<<...>>>`)")]
    compiled = any(d._calls_any(n, _CPP_EXT) for n in d.m.nodes("call"))
    if not compiled:
        return [Finding(kernels[0], "the CUDA source is never compiled with torch.utils.cpp_extension.load_inline/load")]
    return []


def _check_cuda_launch(d: DslModel) -> list[Finding]:
    return _launch_findings(d, "a function of the compiled CUDA extension")


_CPP_ALLOWED = {
    "Tensor", "TensorOptions", "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones",
    "ones_like", "full", "kFloat", "kFloat32", "kHalf", "kFloat16", "kBFloat16", "kInt", "kInt32",
    "kLong", "kInt64", "kByte", "kChar", "kBool", "kCUDA", "ScalarType", "Half", "BFloat16", "cuda",
    "Device", "DeviceGuard", "OptionalDeviceGuard", "IntArrayRef", "optional", "TensorArg",
    "MemoryFormat", "dtype", "device", "Scalar", "Layout", "kStrided", "Float8_e4m3fn", "Float8_e5m2",
    "acc_type", "opmath_type", "numeric_limits", "TensorAccessor", "PackedTensorAccessor32",
    "PackedTensorAccessor64", "RestrictPtrTraits", "DefaultPtrTraits", "CUDAGuard", "OptionalCUDAGuard",
    "checkAllSameGPU",
}
_CPP_DTYPE_CONST = re.compile(r"^k[A-Z]\w*$")  # at::kFloat8_e4m3fn, torch::kInt8, ...
_CPP_NS_RE = re.compile(r"\b(?:at|torch)::(\w+)")
_CPP_VENDOR_RE = re.compile(r"\b(cublas\w*|cublasLt\w*|cudnn\w*|thrust::\w+|cub::Device\w+|cutlass::gemm::device\w*|cusparse\w*|cufft\w*)")
_CPP_METHOD_RE = re.compile(r"\.\s*(" + "|".join(sorted(
    {"softmax", "log_softmax", "matmul", "mm", "bmm", "exp", "sum", "mean", "max", "min", "pow", "sqrt",
     "rsqrt", "norm", "mul", "div", "addmm", "topk", "sort", "cumsum", "sigmoid", "tanh", "relu", "amax"},
    key=len, reverse=True)) + r")\s*\(")


def _check_cuda_source_compute(d: DslModel) -> list[Finding]:
    out = []
    for node, v in _source_strings(d):
        if not re.search(r"#include|__global__|torch::|at::", v):
            continue
        for m in _CPP_NS_RE.finditer(v):
            if m.group(1) not in _CPP_ALLOWED and not _CPP_DTYPE_CONST.match(m.group(1)):
                out.append(Finding(node, f"C++ source calls `{m.group(0)}`"))
                break
        vm = _CPP_VENDOR_RE.search(v)
        if vm:
            out.append(Finding(node, f"C++ source uses vendor library `{vm.group(1)}`"))
        mm = _CPP_METHOD_RE.search(v)
        if mm and "Tensor" in v:
            out.append(Finding(node, f"C++ source calls tensor method `.{mm.group(1)}(`"))
    return out


_SKIP_PARENTS = ("dotted_name", "aliased_import", "parameters", "default_parameter", "typed_parameter",
                 "typed_default_parameter", "lambda_parameters")


def _chain_re(model: ModuleModel) -> "re.Pattern[bytes]":
    if model.chain_re is None:
        names = sorted(set(model.aliases) | {"getattr"})
        model.chain_re = re.compile(rb"(?<![\w.])(" + b"|".join(re.escape(x.encode()) for x in names) + rb")\b")
    return model.chain_re


def _maximal_chains(model: ModuleModel, body: Node):
    """Outermost dotted names in `body` rooted at an imported or aliased name, and
    `getattr(mod, "lit")` calls (which read like one). Roots are found by a regex over the body's
    text and mapped back to nodes, so only the few interesting nodes are ever touched."""
    rx = _chain_re(model)
    base = body.start_byte
    seen: set[int] = set()
    for m in rx.finditer(model.body_bytes(body)):
        n = model.node_at(base + m.start(1), base + m.end(1))
        if n is None or n.type != "identifier":
            continue  # inside a string or comment
        p = n.parent
        if p is None or p.type in _SKIP_PARENTS:
            continue
        if p.type == "keyword_argument" and p.child_by_field_name("name") == n:
            continue
        if text(n) == "getattr" and "builtins.getattr" in model.qualnames(n):
            if p.type == "call" and p.child_by_field_name("function") == n and p.id not in seen:
                seen.add(p.id)
                yield p
            continue
        while p is not None and p.type == "attribute" and p.child_by_field_name("object") == n:
            n, p = p, p.parent
        if n.id not in seen:
            seen.add(n.id)
            yield n


_METHOD_RE = re.compile(rb"\.\s*(" + b"|".join(
    re.escape(m.encode()) for m in sorted(TENSOR_COMPUTE_METHODS, key=len, reverse=True)) + rb")\b")


def _compute_method_calls(model: ModuleModel, body: Node):
    """(node, method name) for `<expr>.<tensor compute method>` in `body`: the call where it is called
    there, else the attribute itself (a bound method handed on, `f = x.softmax; f(-1)`, or the
    `(x.softmax or d)` that `getattr(x, "softmax", d)` reads as)."""
    base = body.start_byte
    for m in _METHOD_RE.finditer(model.body_bytes(body)):
        n = model.node_at(base + m.start(1), base + m.end(1))
        if n is None or n.type != "identifier":
            continue
        attr = n.parent
        if attr is None or attr.type != "attribute" or attr.child_by_field_name("attribute") != n:
            continue
        call = attr.parent
        if call is not None and call.type == "call" and call.child_by_field_name("function") == attr:
            yield call, text(n)
        elif not (call is not None and call.type in ("assignment", "augmented_assignment")
                  and call.child_by_field_name("left") == attr):
            yield attr, text(n)  # (written, `self.max = 3`, is no use of a method)


def _torch_ok(q: str, dsl: str, ext_ops: set[str]) -> bool:
    head = q.split("()")[0]
    if head in TORCH_ALLOWED or head in _TORCH_ALLOWED_BY_DSL.get(dsl, ()):
        return True
    if any(head.startswith(p) for p in TORCH_ALLOWED_PREFIXES):
        return True
    parts = head.split(".")
    if len(parts) >= 4 and parts[:2] == ["torch", "ops"] and f"{parts[2]}.{parts[3]}" in ext_ops:
        return True  # an op the module registers itself (never another op of its namespace)
    return False


def _check_torch_compute(d: DslModel) -> list[Finding]:
    out: list[Finding] = []
    for fn, part in ((f, p) for f in d.host_path() for p in f.scanned):
        for n in _maximal_chains(d.m, part):
            for q in d.m.qualnames(n):
                if q.split(".")[0] != "torch" or q == "torch":
                    continue
                if not _torch_ok(q, d.dsl, d._ext_ops):
                    out.append(Finding(n, f"`{q.split('()')[0]}` on the entry path (in `{fn.name}`)"))
                    break
                tail = q.split("()")[1:]
                bad = [seg.strip(".").split(".")[0] for seg in tail if seg.strip(".").split(".")[0] in TENSOR_COMPUTE_METHODS]
                if bad:
                    out.append(Finding(n, f"tensor method `.{bad[0]}()` on the entry path (in `{fn.name}`)"))
                    break
        for call, name in _compute_method_calls(d.m, part):
            f = call.child_by_field_name("function") if call.type == "call" else call
            qs = d.m.qualnames(f) if f is not None else frozenset()
            if f is None or (qs and not any(q.startswith("builtins.") for q in qs)):
                continue  # torch chains were judged above; `math.ceil(...)` is a module's function, not a tensor's
            obj = f.child_by_field_name("object")
            if not (obj is not None and d.is_handle(obj)):
                out.append(Finding(call, f"tensor method `.{name}()` on the entry path (in `{fn.name}`)"))
        for call in d.m.nodes_in("call", part):
            f = call.child_by_field_name("function")
            if f is None or f.type != "identifier" or "builtins.getattr" not in d.m.qualnames(f):
                continue
            args = call.child_by_field_name("arguments")
            pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
            lit = string_value(pos[1]) if len(pos) >= 2 else None
            if lit in TENSOR_COMPUTE_METHODS:
                out.append(Finding(call, f"tensor method `{lit}` through getattr on the entry path (in `{fn.name}`)"))
        for n in d.m.nodes_in("matmul", part):
            out.append(Finding(n, f"matrix product operator `@` on the entry path (in `{fn.name}`)"))
    return out


def _check_foreign_call(d: DslModel) -> list[Finding]:
    allowed = _SAFE_ROOTS | _ROOTS_BY_DSL.get(d.dsl, set()) | {"torch"}
    out: list[Finding] = []
    for fn, part in ((f, p) for f in d.host_path() for p in f.scanned):
        for n in _maximal_chains(d.m, part):
            for q in d.m.qualnames(n):
                root = q.split(".")[0]
                if root.startswith(".") or q.startswith("."):
                    out.append(Finding(n, f"relative import `{q}` on the entry path"))
                    break
                if root not in allowed:
                    out.append(Finding(n, f"`{q.split('()')[0]}` (from `{root}`) on the entry path (in `{fn.name}`)"))
                    break
    return out


def _check_dynamic_lookup(d: DslModel) -> list[Finding]:
    m = d.m
    out = [Finding(s, "star import hides where names come from") for s in m.star_imports]
    for imp in m.import_nodes:
        if re.search(r"\bimportlib\b|\brunpy\b", text(imp)):
            out.append(Finding(imp, "importlib/runpy import"))
    for n in m.nodes("call"):
        fn = n.child_by_field_name("function")
        if fn is None:
            continue
        qs = m.qualnames(fn)
        bad = qs & {"builtins.eval", "builtins.exec", "builtins.compile", "builtins.__import__",
                    "builtins.globals", "builtins.locals", "builtins.vars"}
        if bad:
            out.append(Finding(n, f"`{min(bad).split('.')[-1]}()` call"))
            continue
        if qs & {"builtins.getattr", "builtins.setattr", "builtins.delattr", "builtins.hasattr"}:
            args = n.child_by_field_name("arguments")
            pos = [a for a in (args.named_children if args is not None else []) if a.type != "comment"]
            if len(pos) < 2 or string_value(pos[1]) is None:
                out.append(Finding(n, f"`{text(fn)}` with a computed attribute name"))
            elif any(not q.startswith("builtins.") for q in m.qualnames(pos[0])):
                out.append(Finding(n, f"`{text(fn)}` on a module: write `module.{string_value(pos[1])}`"))
            continue
        if any(q.split(".")[0] in ("importlib", "runpy") for q in qs):
            out.append(Finding(n, "importlib/runpy call"))
    for n in m.nodes("dunder"):
        out.append(Finding(n, f"`{text(n)}` reference"))
    for fn in m.functions.get("__getattr__", []):
        out.append(Finding(fn.node, "module-level __getattr__ makes names appear at run time"))
    return out


_CHECKS: dict[str, Callable[[DslModel], list[Finding]]] = {
    "entry-defined": _check_entry_defined,
    "triton-kernel": _check_triton_kernel,
    "triton-launch": _check_triton_launch,
    "cute-kernel": _check_cute_kernel,
    "cute-launch": _check_cute_launch,
    "cuda-kernel": _check_cuda_kernel,
    "cuda-launch": _check_cuda_launch,
    "cuda-source-compute": _check_cuda_source_compute,
    "torch-compute": _check_torch_compute,
    "foreign-call": _check_foreign_call,
    "dynamic-lookup": _check_dynamic_lookup,
    "no-module-state": lambda d: check_module_state(d, Finding),
}
assert set(_CHECKS) == set(STATIC_CHECKS)

# Which DSL a check's launch/kernel logic is tied to (others use the task's DSL).
_CHECK_DSL = {"triton-kernel": "triton", "triton-launch": "triton", "cute-kernel": "cute",
              "cute-launch": "cute", "cuda-kernel": "cuda", "cuda-launch": "cuda",
              "cuda-source-compute": "cuda"}


def dsl_of_check(check_id: str) -> str | None:
    return _CHECK_DSL.get(check_id)


def run_static_check(check_id: str, model: ModuleModel, dsl: str, entry: str,
                     cache: dict | None = None) -> list[Finding]:
    """Run one named check. `cache` (per candidate) shares the DslModel between checks."""
    use_dsl = _CHECK_DSL.get(check_id, dsl)
    key = (use_dsl, entry)
    d = cache.get(key) if cache is not None else None
    if d is None:
        d = DslModel(model, use_dsl, entry).prepare()
        if cache is not None:
            cache[key] = d
    return _CHECKS[check_id](d)


def is_compiled_object(model: ModuleModel, dsl: str, entry: str, node: Node, cache: dict | None = None) -> bool:
    """Is `node` a compiled DSL object (what a compile cache legitimately holds)?"""
    key = (dsl, entry)
    d = cache.get(key) if cache is not None else None
    if d is None:
        d = DslModel(model, dsl, entry).prepare()
        if cache is not None:
            cache[key] = d
    return d.is_handle(node) or d._is_kernel_ref(node)


def entry_path_node_ids(model: ModuleModel, dsl: str, entry: str, cache: dict | None = None) -> set[int]:
    """Ids of the function_definition nodes (and module-level value assignments) on the entry path,
    DSL device functions included."""
    key = (dsl, entry)
    d = cache.get(key) if cache is not None else None
    if d is None:
        d = DslModel(model, dsl, entry).prepare()
        if cache is not None:
            cache[key] = d
    return {f.node.id for f in d.entry_path()}


__all__ = ["STATIC_CHECKS", "TENSOR_COMPUTE_METHODS", "TORCH_ALLOWED", "Finding", "DslModel",
           "run_static_check", "entry_path_node_ids", "dsl_of_check", "root_identifier"]

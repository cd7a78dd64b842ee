"""Correctness and runtime guards, judged in the parent from what the child sends back.

Per shape (every shape of the device's set, long ones included), each call on inputs from a new
secret seed unless said otherwise:
  1. candidate on inputs A, the allocator's free memory poisoned      -> compare with reference(A)
  2. candidate on a fresh copy of A, free memory holding what a user's
     process would (earlier values); 1 and 2 in a drawn order         -> compare, and with call 1
     (reads of memory nothing wrote show up as a disagreement: "poison-consistent")
  2b. candidate on new inputs F of the same shape, memory drawn       -> compare (caches go stale)
  3. candidate on inputs B with every Triton launch a no-op ("ghost"),
     memory poisoned                                                  -> must NOT match reference(B),
     else the result doesn't come from the kernels ("dsl-kernel-runs")
  4. GPU, unless the task opts out: capture in a CUDA graph on inputs C, copy inputs D in, replay
     -> compare with reference(D) ("cuda-graph-capturable")
The reference always runs here, in the parent, on its own copy of inputs made from the same seed.

Poison (issue 37): a fixed pattern on every checked call told a kernel it was being checked (it
could look at its fresh output buffer), and a kernel careful only then was wrong for users. So the
poison is drawn from the evaluation's secret (poison_fill: a word no two evaluations need share, of
which every element is NaN, Inf or out of range), and some checked calls run on memory a user's
process has (user_fill: earlier tensors' values, or zeros): one of the pair on every shape, and a
drawn share of the others (drawn_fill). What poisoning proves stays: the poisoned call shows an
element never written, and the pair must agree.
"""
from __future__ import annotations

import math
import random
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.evaluate import trace
from harness.authoring.contract import apply as apply_contract
from harness.evaluate.channel import SAMPLE_MIN, rows_to_check
from harness.evaluate.process import derive_seed
from harness.evaluate.verdict import median
from harness.authoring.tasks import Shape, Task, compare

# torch is imported inside each function, for start-up time (seconds): importing this module (heldout, timing_stage
# and the tests do) costs no torch; the evaluation pays for it once, on first use.

if TYPE_CHECKING:
    from harness.evaluate.process import ChildProcess, EvalOptions, _Run


def _clone(xs: Any) -> list:
    import torch  # (start-up: the note above the imports)

    return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]


# The high byte of every 2-byte half of a poison word: 0x7F or 0xFF make a bf16/fp16/fp32 element
# NaN, Inf or at least 1.7e38 whatever the other bytes hold.
_POISON_HIGH = (0x7F, 0xFF)


def poison_fill(seed: int) -> dict:
    """A poison drawn from `seed` (guards.fill_allocator): a 32-bit word, tiled, each 2-byte half's high
    byte 0x7F or 0xFF and the low bytes drawn (the lowest never 0xFF, so no element reads -1, an index's
    padding)."""
    rng = random.Random(seed)
    word = bytes([rng.randrange(0xFF), rng.choice(_POISON_HIGH), rng.randrange(256), rng.choice(_POISON_HIGH)])
    return {"kind": "pattern", "word": int.from_bytes(word, "little")}


def user_fill(seed: int) -> dict:
    """Free memory as a user's process has it: earlier tensors' values (normal draws from `seed`)."""
    return {"kind": "values", "seed": seed}


def drawn_fill(seed: int, poison: dict) -> dict:
    """A checked call's memory, drawn from `seed`: half of the calls poisoned (`poison`), the others
    holding earlier values or zeros, as a user's would."""
    u = random.Random(seed).random()
    return poison if u < 0.5 else user_fill(seed) if u < 0.8 else {"kind": "zeros"}


def _make(ref_mod: ModuleType, task: Task, shape: Shape, seed: int, on_gpu: bool = False,
          case: dict | None = None) -> tuple[list, Any]:
    """Inputs (bit-identical to the child's: same seed, same device, the same contract case applied
    after make_inputs: harness.authoring.contract.apply) and the expected output.

    On a GPU box inputs are made, the reference run and the comparison done on the GPU: made on
    the CPU, one 128k-column shape's inputs took seconds each, most of an evaluation's wall time.
    A task's custom `compare` gets CPU tensors, as it was written for; so does everything when the
    GPU reference runs out of memory.
    """
    with trace.span("make", shape=shape.name):
        return _make_here(ref_mod, task, shape, seed, on_gpu, case)


def _make_here(ref_mod: ModuleType, task: Task, shape: Shape, seed: int, on_gpu: bool,
               case: dict | None) -> tuple[list, Any]:
    import torch  # (start-up: the note above the imports)

    dt = getattr(torch, task.dtypes[0])
    gpu = on_gpu and torch.cuda.is_available()
    xs = ref_mod.make_inputs(shape.dims, dt, seed, "cuda" if gpu else "cpu")
    xs = apply_contract(list(xs) if isinstance(xs, (tuple, list)) else [xs], case, seed)
    if gpu:
        try:
            exp = ref_mod.reference(*_clone(xs))
            if not callable(getattr(ref_mod, "compare", None)):
                return xs, exp
            return _cpu(xs), _cpu(exp)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
    xs = _cpu(xs)
    return xs, ref_mod.reference(*_clone(xs))


def _cpu(x: Any) -> Any:
    import torch  # (start-up: the note above the imports)

    if isinstance(x, (tuple, list)):
        return type(x)(_cpu(y) for y in x)
    return x.cpu() if isinstance(x, torch.Tensor) else x


def shape_bytes(ref_mod: ModuleType, task: Task, dims: dict) -> int:
    """A shape's input bytes, without building it: reference.input_bytes(dims, dtype) where the
    inputs are larger than what a kernel reads (caches read through indices), else half of
    bytes_moved (inputs and outputs of about the same size), else 2 bytes per element of the dims."""
    import torch  # (start-up: the note above the imports)

    dt = getattr(torch, task.dtypes[0])
    if callable(getattr(ref_mod, "input_bytes", None)):
        return int(ref_mod.input_bytes(dims, dt))
    if callable(getattr(ref_mod, "bytes_moved", None)):
        return int(ref_mod.bytes_moved(dims, dt)) // 2
    return 2 * math.prod(v for v in dims.values() if isinstance(v, int))


def _nbytes(x: Any) -> int:
    import torch  # (start-up: the note above the imports)

    xs = x if isinstance(x, (tuple, list)) else (x,)
    return sum(t.numel() * t.element_size() for t in xs if isinstance(t, torch.Tensor))


def disagreement(task: Task, a: Any, b: Any) -> str | None:
    """Do two outputs of the same inputs agree? NaN/Inf must sit in the same places; finite
    values within the task's tolerance (a deterministic kernel gives identical bits)."""
    import torch  # (start-up: the note above the imports)

    tol = task.tolerance[task.dtypes[0]]
    xs = a if isinstance(a, (tuple, list)) else (a,)
    ys = b if isinstance(b, (tuple, list)) else (b,)
    dev = "cuda" if torch.cuda.is_available() else "cpu"  # seconds on the CPU for a long shape's output
    for i, (x, y) in enumerate(zip(xs, ys)):
        if x.shape != y.shape:
            return f"output {i} shapes differ: {tuple(x.shape)} vs {tuple(y.shape)}"
        xf, yf = x.to(dev).float(), y.to(dev).float()
        fx, fy = torch.isfinite(xf), torch.isfinite(yf)
        if not torch.equal(fx, fy):
            return f"output {i}: {int((fx != fy).sum())} elements are NaN/Inf in one run only"
        d = (xf[fx] - yf[fy]).abs() > tol.atol + tol.rtol * yf[fy].abs()
        if d.any():
            return f"output {i}: {int(d.sum())} of {d.numel()} elements differ between the runs"
    return None


def elementwise(ref_mod: ModuleType) -> bool:
    """Whether outputs are compared element by element (so a sample of rows means something): not
    where the task brings its own compare (e.g. top-k sets), which gets whole outputs."""
    return not callable(getattr(ref_mod, "compare", None))


def sampled_rows(exp: Any, rows_seed: int | None, min_bytes: int | None = None) -> Any:
    """The rows of the expected output(s) that a child sent for `rows_seed` (channel.rows_to_check:
    outputs of `min_bytes` and up), the rest whole; `exp` itself without a seed."""
    if rows_seed is None:
        return exp
    import torch  # (start-up: the note above the imports)

    multi = isinstance(exp, (tuple, list))
    exps = list(exp) if multi else [exp]
    for i, e in enumerate(exps):
        rows = rows_to_check(rows_seed, i, tuple(e.shape), e.numel() * e.element_size(), min_bytes)
        if rows is not None:
            exps[i] = e.index_select(0, torch.tensor(rows, device=e.device))
    return type(exp)(exps) if multi else exps[0]


def shape_entry(shape: Shape) -> dict:
    return {"name": shape.name, "dims": dict(shape.dims), "long": shape.long, "protected": shape.protected,
            "correct": False, "error": None,
            "candidate_us": None, "incumbent_us": None, "speedup": None, "roofline_pct": None,
            "candidate_graph_us": None, "incumbent_graph_us": None, "noise_pct": None}


def _as_out(outs: list, n_out: int) -> Any:
    return outs[0] if n_out == 1 else tuple(outs)


def _crash_message(reply: dict) -> str:
    detail = reply.get("detail")
    what = {"sys-exit": "called sys.exit", "oom": "ran out of memory", "cuda-error": "raised a CUDA error",
            "exception": "raised"}.get(detail or "", "failed")
    tb = reply.get("traceback", "")
    return f"the candidate {what}: {reply.get('error')}" + (f"\n{tb[-1500:]}" if tb else "")


def check_all(run: "_Run", child: "ChildProcess", task: Task, ref_mod: ModuleType, shapes: list[Shape],
              on_gpu: bool, opts: "EvalOptions", secret: int) -> bool:
    """Run every shape; True when every shape is correct and no guard fired.

    Cheap first (issue 18): the shapes run smallest first, and once one gives a wrong answer or
    crashes, the larger ones are not compiled or run: the candidate is rejected at correctness
    either way, so a reject costs the smallest shape rather than all of them. The verdict keeps
    every shape in the task's order; those not run say why. A guard finding alone (the output was
    right) does not stop the run: a later shape's wrong answer must still make it a correctness
    rejection, as it always did."""
    entries = [shape_entry(s) for s in shapes]
    run.shapes.extend(entries)
    order = sorted(range(len(shapes)), key=lambda i: (shape_bytes(ref_mod, task, shapes[i].dims), i))
    all_ok = True
    for n, i in enumerate(order):
        shape, entry = shapes[i], entries[i]
        try:
            ok = _check_shape(run, child, task, ref_mod, shape, entry, on_gpu, opts,
                              lambda *p, s=shape: derive_seed(secret, s.name, *p))
        except Exception:
            for j in order[n + 1:]:  # every shape stays in the verdict, marked as not run
                entries[j]["error"] = "not run: the child process failed earlier"
            raise
        all_ok = all_ok and ok
        if not entry["correct"] and n + 1 < len(order):
            for j in order[n + 1:]:
                entries[j]["error"] = (f"not run: the candidate was already wrong on {shape.name!r} (shapes are "
                                       "checked smallest first)")
            return False
    return all_ok and not run.reasons


def _check_shape(run: "_Run", child: "ChildProcess", task: Task, ref_mod: ModuleType, shape: Shape, entry: dict,
                 on_gpu: bool, opts: "EvalOptions", seed_of: Any) -> bool:
    dtype = task.dtypes[0]
    tag = f"[{shape.name}] "
    fails: list[str] = []
    wrong: list[str] = []  # this shape's incorrect / crashed rejections (its reasons' words carry the tag only)

    # The fresh-inputs, ghost and graph-replay calls ask whether the output is stale, independent of
    # the kernels, or wrong on replay: 64 rows of a large output answer that (an honest kernel is wrong
    # nowhere, a stale or ghost output almost everywhere), so only those rows travel and are compared;
    # the poison pair stays whole, since uninitialised reads may touch a few rows. Elementwise tasks
    # only (a task's own compare gets whole outputs). Saved about half the stage's transfers.
    sample = elementwise(ref_mod)

    def rows_of(tag: str) -> tuple[dict, Any]:
        """The call's request keys, and the same rows of an expected output."""
        if not sample:
            return {}, lambda e: e
        seed = seed_of("rows", tag)
        return {"rows_seed": seed, "rows_min_bytes": SAMPLE_MIN}, lambda e: sampled_rows(e, seed, SAMPLE_MIN)

    def call(req: dict) -> tuple[dict, list]:
        base = {"op": "call", "role": "candidate", "dims": shape.dims}
        try:
            return child.request(dict(base, **req), opts.run_timeout_s)
        except Exception as e:
            entry["error"] = str(e)
            raise

    def guard_observations(reply: dict) -> None:
        for n in reply.get("notes", []):
            if tag + n not in run.notes:
                run.notes.append(tag + n)
        for o in reply.get("observed", []):
            run.reject("guard", o["rule"], tag + o["message"])
            fails.append(o["rule"])
            if o["rule"] in ("incorrect", "crashed"):
                wrong.append(o["rule"])

    def judge(reply: dict, outs: list, xs: list, exp: Any, what: str) -> Any:
        if not reply.get("ok"):
            msg = _crash_message(reply)
            run.reject("correctness", "crashed", tag + msg)
            wrong.append("crashed")
            fails.append(msg.splitlines()[0])
            return None
        guard_observations(reply)
        if len(outs) != reply.get("n_out", 1):
            fails.append("output is not a plain tensor")
            return None
        out = _as_out(outs, reply["n_out"])
        with trace.span("compare", shape=shape.name):
            err = compare(task, ref_mod, out, exp, tuple(xs), dtype)
        if err:
            run.reject("correctness", "incorrect", f"{tag}{what}: {err}")
            wrong.append("incorrect")
            fails.append(err)
        return out

    # 1 and 2: the poison pair, one on poisoned memory and one on a user's kind, in a drawn order
    sa = seed_of("a")
    xs, exp = _make(ref_mod, task, shape, sa, on_gpu)
    nb = _nbytes(exp)
    poison = poison_fill(seed_of("poison"))
    pair = [poison, user_fill(seed_of("user"))]
    random.Random(seed_of("pair")).shuffle(pair)
    r1, o1 = call({"seed": sa, "fill": pair[0], "out_nbytes": nb})
    out1 = judge(r1, o1, xs, exp, "output")
    if r1.get("ok"):
        if r1.get("launches", 0) == 0:
            run.reject("guard", "dsl-kernel-runs", f"{tag}the call launched no {task.dsl} kernel; the work must "
                                                   f"run in {task.dsl} kernels")
            fails.append("no kernel launched")
        elif on_gpu and r1.get("hook") and r1.get("driver_launches", 0) == 0:
            run.reject("guard", "dsl-kernel-runs", f"{tag}kernels were 'launched' but none reached the GPU driver")
            fails.append("no kernel reached the driver")
    if out1 is None and not r1.get("ok"):
        entry["error"] = "; ".join(fails)[:500]
        return False
    r2, o2 = call({"seed": sa, "fill": pair[1], "out_nbytes": nb})
    # The child's seconds for the first and second call: the first compiles (bench/throughput.py).
    entry["child_call_s"] = [r1.get("child_s"), r2.get("child_s")]
    out2 = judge(r2, o2, xs, exp, "output (second run, other memory)")
    if out1 is not None and out2 is not None:
        diff = disagreement(task, out1, out2)
        if diff:
            run.reject("guard", "poison-consistent",
                       f"{tag}two runs on the same inputs, on differently filled free memory, disagree ({diff}); the "
                       "kernel reads memory it never wrote (uninitialised or stale)")
            fails.append("poison-inconsistent")

    # 2b: fresh values of the same shape: a result cached by shape, pointer or id is now stale
    if r1.get("ok"):
        sf = seed_of("f")
        xf, expf = _make(ref_mod, task, shape, sf, on_gpu)
        rows, same_rows = rows_of("f")
        rf, of = call({"seed": sf, "fill": drawn_fill(seed_of("fill f"), poison), "out_nbytes": nb, **rows})
        judge(rf, of, xf, same_rows(expf), "output (fresh inputs)")

    # 3: ghost replay: the output must depend on the DSL's kernels
    if r1.get("ok") and r1.get("launches", 0) > 0:
        sb = seed_of("b")
        xb, expb = _make(ref_mod, task, shape, sb, on_gpu)
        rows, same_rows = rows_of("b")
        # Poisoned: a no-op's output must read as wrong, whatever a user's memory would hold there.
        rg, og = call({"seed": sb, "fill": poison, "out_nbytes": nb, "ghost": True, **rows})
        if rg.get("ok") and len(og) == rg.get("n_out", 1):
            if compare(task, ref_mod, _as_out(og, rg["n_out"]), same_rows(expb), tuple(xb), dtype) is None:
                run.reject("guard", "dsl-kernel-runs",
                           f"{tag}the output is still correct with every {task.dsl} launch turned into a no-op: "
                           "the result does not come from the kernels")
                fails.append("output does not depend on the kernels")

    # 4: CUDA graph capture and replay with new inputs
    if on_gpu and task.cuda_graphs:
        sc, sd = seed_of("c"), seed_of("d")
        xd, expd = _make(ref_mod, task, shape, sd, on_gpu)
        rows, same_rows = rows_of("d")
        expd = same_rows(expd)
        rc, oc = call({"seed": sc, "graph": True, "graph_seed": sd, **rows})
        if not rc.get("ok"):
            run.reject("guard", "cuda-graph-capturable",
                       f"{tag}capturing the call in a CUDA graph failed: {rc.get('error')} (make the entry "
                       "capturable: no host syncs, .item(), allocations that depend on values, or CPU work)")
            fails.append("not capturable")
        elif len(oc) == rc.get("n_out", 1) and not wrong:
            # (an output already wrong eagerly says nothing more about graphs)
            err = compare(task, ref_mod, _as_out(oc, rc["n_out"]), expd, tuple(xd), dtype)
            if err:
                run.reject("guard", "cuda-graph-capturable",
                           f"{tag}replaying the CUDA graph with new inputs copied in gave a wrong answer: {err}")
                fails.append("wrong on graph replay")

    entry["correct"] = not wrong
    if fails:
        entry["error"] = "; ".join(dict.fromkeys(f.splitlines()[0] for f in fails))[:500]
    return not fails


def input_bytes(ref_mod: ModuleType, task: Task, shape: Shape) -> int:
    import torch  # (start-up: the note above the imports)

    xs, _ = _make(ref_mod, task, shape, 0) if not hasattr(ref_mod, "bytes_moved") else (None, None)
    if xs is not None:
        return _nbytes(xs)
    # bytes_moved counts inputs and outputs; inputs are about half for same-size in/out tasks
    return max(int(ref_mod.bytes_moved(shape.dims, getattr(torch, task.dtypes[0])) // 2), 1)


def n_buffers(in_bytes: int, l2_bytes: int) -> int:
    """Enough input sets to exceed 2x L2 together, at least 2, at most 16 (memory)."""
    return max(2, min(16, math.ceil(2 * l2_bytes / max(in_bytes, 1))))


def incumbent_baseline(child: "ChildProcess", task: Task, shapes: list[Shape], dev: dict, secret: int,
                       opts: "EvalOptions") -> dict[str, float]:
    """Median time of the incumbent on each shape before the candidate is imported."""

    ref_mod = task.load_reference()
    tol = task.tolerance[task.dtypes[0]]
    out: dict[str, float] = {}
    for shape in shapes:
        nb = n_buffers(input_bytes(ref_mod, task, shape), dev.get("l2_bytes", 50 * 2**20))
        r, _ = child.request({"op": "time", "dims": shape.dims, "roles": ["incumbent"],
                              "seeds": [derive_seed(secret, shape.name, "base", i) for i in range(nb + 1)],
                              "samples": max(10, opts.samples // 2), "warmup": opts.warmup, "atol": tol.atol,
                              "rtol": tol.rtol, "l2_bytes": dev.get("l2_bytes"), "graph": False},
                             opts.run_timeout_s)
        if r.get("ok"):
            out[shape.name] = median(r["roles"]["incumbent"]["event_us"])
    return out

"""Per-bucket keeps and the dispatcher `sessions export` writes (issue 10: from kernel to model).

Words, used the same way in export, report, e2e and the README:
- a *per-bucket keep*: the decision to keep a candidate for some buckets only (`K`, `b`,
  `--keep-buckets auto`; a `BucketKeep` record);
- the *routing table*: which kernel runs in each bucket (`dispatch_table`);
- the *dispatcher*: the one module `sessions export` writes when a session has per-bucket keeps,
  routing each call by that table. Without per-bucket keeps, export writes the best kernel alone.

A candidate often wins on part of a task's range only (short rows, contexts up to 100k…). A task may
declare `[[buckets]]` (ranges of one dim) and a `default` ("module:function" in the task folder, what
users would run otherwise). Then a person can keep a candidate *for the buckets where it wins*:

- git: the candidate's commit goes on `refs/buckets/<bucket>` in the session's repository. (Not
  `refs/heads/best/<bucket>`: git can't hold `refs/heads/best` and `refs/heads/best/x` at once.)
- journal: a `BucketKeep` record {iteration, commit, buckets, by, reason, measurements}, written
  (fsync'd) before any ref moves, so a kill in between is finished by `restore_bucket_refs`.

`export_session` writes one importable module: each winning kernel's source embedded under its own
module name, the routing table sending each call by the bucket dim read off the inputs, the default
elsewhere, and the table with its measurements in the module docstring.

Resolution per bucket: the latest bucket keep; else the session's best if it was ever kept (a plain
keep wins the whole range against its incumbent); else the default. Shapes in no bucket run the default.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.util
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

# Which buckets a verdict wins lives in harness/evaluate/buckets.py (the keep policy reads it there, and
# evaluate imports nothing of the session); re-exported here, where per-bucket keeps use it.
from harness.evaluate.buckets import BucketResult, bucket_results, shape_dims, winning_buckets  # noqa: F401
from harness.evaluate.records import Verdict
from harness.sessions.history import SessionHistory
from harness.authoring.tasks import Bucket, Shape, Task, TaskError, compare, load_module, load_task

BUCKET_REF_PREFIX = "refs/buckets/"
BUCKET_KEPT_PREFIX = "refs/kept-buckets/"
DEFAULT_DEFAULT = "reference:reference"  # no `default` and no default.py: the reference (torch)


class DispatchError(Exception):
    """A problem a user can fix; str() names the file or session and what to do."""


# -- bucket-limited keeps in git and the journal -----------------------------------------------

def bucket_ref(name: str) -> str:
    """A git ref for a bucket name (names may hold spaces, '<', '≤'…)."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "bucket"
    return BUCKET_REF_PREFIX + slug


def _check_bucket_names(task: Task | None, buckets: list[str]) -> None:
    if task is None:
        return
    known = [b.name for b in task.buckets]
    if not known:
        raise DispatchError(f"{task.toml_path}: no [[buckets]] declared; add some "
                            "(name, dim, lo, hi) to keep a candidate for part of the range")
    unknown = [b for b in buckets if b not in known]
    if unknown:
        raise DispatchError(f"{task.toml_path}: unknown bucket(s) {unknown}; declared: {known}")


def keep_for_buckets(session, iteration: int, commit: str, buckets: list[str], task: Task | None = None,
                     verdict: Verdict | None = None, by: str = "human", reason: str = "") -> dict:
    """Keep `commit` for `buckets` only: journal a BucketKeep (fsync'd), then move the bucket refs.

    `best` does not move: elsewhere the incumbent still runs. Returns the journal record.
    """
    if not buckets:
        raise DispatchError("keep_for_buckets: no bucket given (nothing to keep the candidate for)")
    _check_bucket_names(task, buckets)
    measurements = {}
    if task is not None and verdict is not None:
        measurements = {r.bucket: r.to_dict() for r in bucket_results(task, verdict) if r.bucket in buckets}
    record = {"kind": "BucketKeep", "iteration": iteration, "commit": commit, "buckets": list(buckets),
              "by": by, "reason": reason, "measurements": measurements}
    session.record(record)  # on disk before git moves, as the loop does for Decision
    _apply_bucket_keep(session.workspace, record)
    return record


def _apply_bucket_keep(ws, record: dict) -> None:
    for b in record["buckets"]:
        ws.git("update-ref", bucket_ref(b), record["commit"])
    ws.git("update-ref", f"{BUCKET_KEPT_PREFIX}{record['iteration']:04d}", record["commit"])


class KeepBucketsDecider:
    """`--keep-buckets auto`: wraps the loop's decider. When a keepable candidate loses overall (the
    harness recommends revert and nobody gave a veto reason) but wins some buckets, the reply carries
    `buckets`; the loop's hook then calls keep_for_buckets. A person's reasoned veto is respected."""

    def __init__(self, inner, task: Task, margin: float = 0.0, session=None):
        self.inner, self.task, self.margin, self.session = inner, task, margin, session

    def _beats_holder(self, request, bucket: str) -> bool:
        """Each candidate is measured against the session's best, not against a bucket's current
        holder: without this, a later, slower bucket winner (a search tries many) would replace a
        faster one. Compared on the times both keeps recorded (same machine, same session)."""
        if self.session is None:
            return True
        held = None
        for r in bucket_keeps(self.session):
            if bucket in r.get("buckets", []):
                held = (r.get("measurements") or {}).get(bucket, {}).get("candidate_us")
        mine = next((r.candidate_us for r in bucket_results(self.task, request.verdict) if r.bucket == bucket), None)
        return held is None or mine is None or mine < held

    def decide(self, request):
        reply = self.inner.decide(request)
        if (reply.action != "keep" and request.action != "keep" and request.can_keep and not reply.reason
                and not getattr(reply, "buckets", None)):
            wins = [b for b in winning_buckets(self.task, request.verdict, self.margin)
                    if self._beats_holder(request, b)]
            if wins:
                reply.buckets = wins  # an attribute until DecisionReply declares the field
                reply.reason = "kept for buckets " + ", ".join(wins) + " only"
        return reply


def bucket_keeps(session) -> list[dict]:
    return SessionHistory.of(session).bucket_keeps


def restore_bucket_refs(session) -> int:
    """Replay BucketKeep records onto refs (a kill between journal and git). Returns refs fixed."""
    ws, fixed = session.workspace, 0
    latest: dict[str, dict] = {}
    for r in bucket_keeps(session):
        for b in r["buckets"]:
            latest[b] = r
    have = ws.refs(BUCKET_REF_PREFIX.rstrip("/"))
    for b, r in latest.items():
        if have.get(bucket_ref(b)) != r["commit"]:
            ws.git("update-ref", bucket_ref(b), r["commit"])
            fixed += 1
    return fixed


# -- the routing table: which kernel runs in each bucket --------------------------------------------

@dataclass
class TableRow:
    bucket: Bucket
    kind: str  # bucket-keep | best | default
    commit: str | None = None
    iteration: int | None = None
    measurements: dict = field(default_factory=dict)  # BucketResult.to_dict()

    @property
    def label(self) -> str:
        if self.kind == "default":
            return "default"
        prefix = "best, " if self.kind == "best" else ""
        return f"{prefix}iter {self.iteration} ({(self.commit or '')[:10]})"


def dispatch_table(session, task: Task, history: SessionHistory | None = None) -> list[TableRow]:
    """One row per bucket of the task (see the module docstring for the resolution order)."""
    h = history or SessionHistory.of(session)
    latest: dict[str, dict] = {}
    for r in h.bucket_keeps:
        for b in r["buckets"]:
            latest[b] = r
    keep = h.last_keep
    # the latest verdict of the kept iteration (a re-measurement after the keep included)
    keep_verdict = h.steps[keep.get("iteration")].verdict if keep is not None else None
    best_results = ({r.bucket: r.to_dict() for r in bucket_results(task, keep_verdict)}
                    if keep_verdict is not None else {})
    rows = []
    for b in task.buckets:
        if b.name in latest:
            r = latest[b.name]
            rows.append(TableRow(b, "bucket-keep", r["commit"], r["iteration"], r.get("measurements", {}).get(b.name, {})))
        elif keep is not None:
            rows.append(TableRow(b, "best", keep["commit"], keep["iteration"], best_results.get(b.name, {})))
        else:
            rows.append(TableRow(b, "default"))
    return rows


# -- which input carries a bucket's dim --------------------------------------------------------

def bucket_axis(task: Task, dim: str, ref: ModuleType | None = None) -> tuple[int, int]:
    """(input index, axis) whose size is `dims[dim]` on every interpreter shape.

    reference.py may say it outright with `bucket_axis(dim) -> (input_index, axis)`; otherwise it is
    inferred by building the interpreter shapes' inputs (small, on the CPU) and matching sizes.
    """
    import torch  # (seconds to import: the loop imports this module for bucket keeps, which rarely need it)

    ref = ref or task.load_reference()
    if callable(getattr(ref, "bucket_axis", None)):
        return tuple(ref.bucket_axis(dim))  # type: ignore[return-value]
    shapes = [s for s in task.interpreter_shapes if dim in s.dims]
    if not shapes:
        raise DispatchError(f"{task.toml_path}: buckets use dim {dim!r}, which no interpreter shape has")
    candidates: set[tuple[int, int]] | None = None
    for s in shapes:
        inputs = ref.make_inputs(s.dims, getattr(torch, task.dtypes[0]), 0, "cpu")
        here = {(i, a) for i, x in enumerate(inputs) if isinstance(x, torch.Tensor)
                for a, n in enumerate(x.shape) if n == s.dims[dim]}
        candidates = here if candidates is None else candidates & here
    if not candidates:
        raise DispatchError(f"{task.reference_path}: no input axis has size dims[{dim!r}] on every interpreter "
                            f"shape; define bucket_axis(dim) -> (input_index, axis) there")
    return min(candidates)


# -- the exported module ------------------------------------------------------------------------

def _py_str(src: str) -> str:
    """Source as a Python literal: readable raw triple quotes where safe, repr() otherwise."""
    if "'''" not in src and not src.endswith("\\") and "\r" not in src:
        return "r'''" + src + "'''"
    return repr(src)


def _fmt(v: Any, spec: str) -> str:
    return format(v, spec) if isinstance(v, (int, float)) else "n/a"


def _range(b: Bucket) -> str:
    hi = "inf" if b.hi >= 2**61 else str(b.hi)
    return f"{b.dim} in [{b.lo}, {hi})"


def _default_spec(task: Task) -> tuple[str, str, str | None]:
    """(module, function, embedded source or None when it is imported by name).

    task.toml `default`, else a default.py in the task folder defining the entry, else the reference."""
    spec = task.default
    if not spec:
        conv = task.root / "default.py"
        spec = f"default:{task.entry}" if conv.is_file() and f"def {task.entry}(" in conv.read_text() else DEFAULT_DEFAULT
    mod, sep, fn = spec.partition(":")
    if not sep or not mod or not fn:
        raise DispatchError(f"{task.toml_path}: default: {spec!r} is not 'module:function'")
    path = task.root / (mod.replace(".", "/") + ".py")
    if path.is_file():
        return mod, fn, path.read_text()
    if importlib.util.find_spec(mod.split(".")[0]) is None:
        raise DispatchError(f"{task.toml_path}: default: module {mod!r} is neither {path} nor importable")
    return mod, fn, None


def checked_span(task: Task, row: TableRow) -> tuple[int, int] | None:
    """[lo, hi] of the bucket's dim the row's kernel was checked on (listed and held-out shapes),
    from its measurements; for a record from before held-out checks, its listed shapes' dims."""
    m = row.measurements or {}
    if m.get("checked"):
        lo, hi = m["checked"]
    else:
        named = {s.name: s.dims for s in task.shapes + task.interpreter_shapes}
        seen = [named[n][row.bucket.dim] for n in m.get("shapes", []) if row.bucket.dim in named.get(n, {})]
        if not seen:
            return None
        lo, hi = min(seen), max(seen)
    lo, hi = max(lo, row.bucket.lo), min(hi, row.bucket.hi - 1)
    return (lo, hi) if lo <= hi else None


def render_dispatcher(task: Task, rows: list[TableRow], sources: dict[str, str], origin: str,
                      axes: dict[str, tuple[int, int]] | None = None) -> str:
    """The module's text. `sources` maps commit -> kernel source for every non-default row."""
    axes = axes or {b.dim: bucket_axis(task, b.dim) for b in task.buckets}
    dmod, dfn, dsrc = _default_spec(task)
    tag = re.sub(r"\W+", "_", task.name)
    # Names carry the source's hash: two dispatchers in one process must not share a cached module.
    dname = f"warpsmith_dispatch_{tag}_default_{hashlib.sha256(dsrc.encode()).hexdigest()[:8]}" if dsrc else ""
    modnames: dict[str, str] = {}
    for r in rows:
        if r.commit and r.commit not in modnames:
            modnames[r.commit] = f"warpsmith_dispatch_{tag}_k{len(modnames)}_{r.commit[:12]}"
    header = ["| bucket | range | runs | kernel us | incumbent us | speedup | shapes measured | routed to it |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        m = r.measurements or {}
        span = checked_span(task, r) if r.commit else None
        routed = "-" if not r.commit else (f"{r.bucket.dim} in [{span[0]}, {span[1]}]" if span else "none (unchecked)")
        header.append(f"| {r.bucket.name} | {_range(r.bucket)} | {r.label} | "
                      f"{_fmt(m.get('candidate_us'), '.1f')} | {_fmt(m.get('incumbent_us'), '.1f')} | "
                      f"{_fmt(m.get('speedup'), '.3f')} | {', '.join(m.get('shapes', [])) or '-'} | {routed} |")
    axis_lines = [f"    {dim}: size of input {i}, axis {a}" for dim, (i, a) in sorted(axes.items())]
    doc = "\n".join([
        f"warpsmith dispatcher for task {task.name!r}: call `{task.entry}(...)` as the task's kernels are called.",
        "",
        f"Exported {_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')} from {origin}.",
        "Routes each call by a dim read off its inputs:",
        *axis_lines,
        "",
        *header,
        "",
        f"Shapes in no bucket, buckets marked 'default', and lengths of a bucket outside the range its kernel",
        f"was checked on (listed and held-out shapes: 'routed to it') run the default: {dmod}:{dfn}.",
        "Buckets are tried in this order; the first that contains the call wins.",
        "Times are the evaluator's per-shape medians when the kernel was kept (geomean over the bucket's",
        "shapes; 'incumbent' is what it was timed against then); n/a where timing was unavailable.",
        "Check this file on a GPU with: PYTHONPATH=. python bench/dispatch.py --check THIS_FILE",
    ])
    lines = [f'"""{doc}\n"""', "from __future__ import annotations", "",
             "import importlib", "import linecache", "import sys", "import types", "",
             f"TASK = {task.name!r}", f"ENTRY = {task.entry!r}", "", "# Each kernel's source, under its own module name.",
             "SOURCES = {"]
    for commit, name in modnames.items():
        lines.append(f"    {name!r}: {_py_str(sources[commit])},")
    if dsrc is not None:
        lines.append(f"    {dname!r}: {_py_str(dsrc)},")
    lines.append("}")
    default_mod = dname if dsrc is not None else dmod
    lines.append(f"DEFAULT = ({default_mod!r}, {dfn!r}, {dsrc is not None})")
    lines.append("# (bucket, input index, axis, lo, hi, module or None for the default, label); a kept kernel's")
    lines.append("# row covers only the lengths it was checked on, the bucket's default row the rest")
    lines.append("TABLE = [")
    for r in rows:
        i, a = axes[r.bucket.dim]
        mod = modnames.get(r.commit) if r.commit else None
        span = checked_span(task, r) if mod else None
        if span:
            lines.append(f"    ({r.bucket.name!r}, {i}, {a}, {span[0]}, {span[1] + 1}, {mod!r}, {r.label!r}),")
        lines.append(f"    ({r.bucket.name!r}, {i}, {a}, {r.bucket.lo}, {r.bucket.hi}, None, 'default'),")
    lines.append("]")
    lines.append(_RUNTIME.replace("ENTRY_NAME", task.entry))
    return "\n".join(lines) + "\n"


# Runtime part of every exported module: plain Python, host-side routing on shapes only (no sync,
# no tensor reads), so the dispatcher can be captured in a CUDA graph like the kernels it routes to.
_RUNTIME = '''

def _load(name):
    mod = sys.modules.get(name)
    if mod is not None:
        return mod
    src = SOURCES[name]
    filename = "<warpsmith " + name + ">"
    # Triton's @jit reads its function's source through inspect/linecache: register it (mtime None
    # keeps linecache.checkcache from dropping it).
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    mod = types.ModuleType(name)
    mod.__file__ = filename
    sys.modules[name] = mod
    try:
        # dont_inherit: this file's `from __future__ import annotations` must not change how Triton
        # reads the kernels' annotations (tl.constexpr)
        exec(compile(src, filename, "exec", dont_inherit=True), mod.__dict__)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def _default_fn():
    name, fn, embedded = DEFAULT
    mod = _load(name) if embedded else importlib.import_module(name)
    return getattr(mod, fn)


_DEFAULT_FN = _default_fn()
_ROUTES = [(b, i, a, lo, hi, getattr(_load(m), ENTRY) if m else _DEFAULT_FN, label)
           for b, i, a, lo, hi, m, label in TABLE]


def route(*args):
    """(bucket, label) this call goes to; (None, 'default') outside every bucket."""
    for b, i, a, lo, hi, fn, label in _ROUTES:
        if lo <= args[i].shape[a] < hi:
            return b, label
    return None, "default"


def ENTRY_NAME(*args, **kwargs):
    for b, i, a, lo, hi, fn, label in _ROUTES:
        if lo <= args[i].shape[a] < hi:
            return fn(*args, **kwargs)
    return _DEFAULT_FN(*args, **kwargs)


def kernels():
    """{label: function} of every distinct implementation in the table, the default included."""
    out = {"default": _DEFAULT_FN}
    for b, i, a, lo, hi, fn, label in _ROUTES:
        out.setdefault(label, fn)
    return out
'''


def export_session(session, out: Path, task: Task | None = None) -> int:
    """`warpsmith sessions export ID -o FILE`. Exit 0 written, 2 bad input (message on stderr)."""
    out = Path(out)
    try:
        task = task or load_task(session.meta.task, check_null=False)
    except TaskError as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    ws = session.workspace
    if not task.buckets or not bucket_keeps(session):
        # Nothing to route: the best kernel as it is, as before this module existed.
        out.write_text(ws.source(ws.best))
        why = (f"task {task.name} declares no [[buckets]]" if not task.buckets
               else "this session has no per-bucket keeps")
        print(f"wrote the best kernel ({ws.best[:10]}) to {out}: {why}, so there is no dispatcher to write")
        return 0
    try:
        restore_bucket_refs(session)
        rows = dispatch_table(session, task)
        sources = {r.commit: ws.source(r.commit) for r in rows if r.commit}
        text = render_dispatcher(task, rows, sources, f"session {session.id} ({session.root})")
    except DispatchError as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    out.write_text(text)
    print(f"wrote a dispatcher for {task.name} to {out}, routing each call by bucket:")
    for r in rows:
        span = checked_span(task, r) if r.commit else None
        only = f" for {r.bucket.dim} in [{span[0]}, {span[1]}] (checked), default elsewhere" if span else (
            " nowhere (no checked length): default" if r.commit else "")
        print(f"  {r.bucket.name:<24} {_range(r.bucket):<28} -> {r.label}{only}")
    dmod, dfn, _ = _default_spec(task)
    print(f"  elsewhere -> default ({dmod}:{dfn})")
    return 0


# -- checks on an exported dispatcher ----------------------------------------------------------

def probe_shapes(task: Task) -> list[tuple[str | None, Shape]]:
    """Small shapes that hit every bucket, at both edges, plus the interpreter shapes as they are.

    Each interpreter shape is clamped into each bucket's range; edges lo and hi-1 are added when
    they are small enough for the interpreter (the interpreter shapes bound the size)."""
    out: list[tuple[str | None, Shape]] = []
    cap = max((max(s.dims.values()) for s in task.interpreter_shapes), default=1 << 15)
    for b in task.buckets:
        base = next((s for s in task.interpreter_shapes if b.dim in s.dims), None)
        if base is None:
            continue
        values = {min(max(base.dims[b.dim], b.lo), b.hi - 1)}
        values |= {v for v in (max(b.lo, 1), b.hi - 1) if 0 < v <= cap}
        for v in sorted(values):
            if v < max(b.lo, 1):
                continue
            dims = {**base.dims, b.dim: v}
            # keep the probe small: the other dims shrink to the smallest interpreter value
            for k in dims:
                if k != b.dim:
                    dims[k] = min(s.dims.get(k, dims[k]) for s in task.interpreter_shapes)
            out.append((b.name, Shape(f"{b.name} @ {b.dim}={v}", dims)))
    for s in task.interpreter_shapes:
        out.append((next((b.name for b in task.buckets if b.contains(s.dims)), None), s))
    return out


def check_dispatcher(task: Task, path: Path, device: str = "cpu", shapes: list[tuple[str | None, Shape]] | None = None,
                     seed: int = 1234) -> list[dict]:
    """Import an exported dispatcher and check it on every probe shape: routed to the expected
    bucket and correct against the task's reference. One dict per shape: {shape, bucket, routed, ok, error}."""
    import torch  # (seconds to import: only here and in bucket_axis)

    mod = load_module(Path(path), f"warpsmith_dispatch_check_{abs(hash(str(path)))}")
    fn = getattr(mod, task.entry, None)
    if not callable(fn):
        raise DispatchError(f"{path}: defines no {task.entry}() (not a dispatcher for task {task.name})")
    ref = task.load_reference()
    dtype = getattr(torch, task.dtypes[0])
    results = []
    for expected_bucket, shape in shapes or probe_shapes(task):
        inputs = ref.make_inputs(shape.dims, dtype, seed, device)
        routed, label = mod.route(*inputs)
        expected = ref.reference(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
        try:
            out = fn(*inputs)
            err = compare(task, ref, out, expected, inputs, task.dtypes[0])
        except Exception as e:  # a kernel that crashes on a shape is a failed check, reported per shape
            err = f"{type(e).__name__}: {e}"
        if err is None and routed != expected_bucket:
            err = f"routed to {routed!r}, expected {expected_bucket!r}"
        results.append({"shape": shape.name, "dims": shape.dims, "bucket": expected_bucket, "routed": label,
                        "ok": err is None, "error": err})
    return results

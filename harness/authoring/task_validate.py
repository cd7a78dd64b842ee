"""`warpsmith tasks validate NAME|DIR`: everything the loader checks, every problem at once where it can,
and what it lets pass but a person should hear.

Errors (exit 1): every unknown key or table of task.toml (file, line, the likely intended key), else the
loader's first refusal (it runs make_inputs and reference on the interpreter shapes: null outputs, hard
cases, the contract), then make_inputs and reference on every interpreter shape in every dtype of the
task (the loader runs the first dtype only), and bytes_moved on every shape. Warnings: no bytes_moved
(no roofline: the profile, the prompt's floors and the tuner's stop rule go without one); the function a
task was made from (`[source]`) has changed in its file since.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.authoring.tasks import Task, TaskError, find_task_dir, load_task, unknown_key_errors

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass
class Validation:
    root: Path
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    ok: str = ""


def validate(name_or_path: str | Path) -> Validation:
    """Raises TaskError only where there is no task to check (no such name or folder)."""
    root = find_task_dir(name_or_path)
    path = root / "task.toml"
    out = Validation(root)
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        out.errors.append(str(TaskError(path, "", f"bad TOML: {e}")))
        return out
    unknown = unknown_key_errors(path, text, data)
    if unknown:  # all of them: the loader would stop at the first
        out.errors += [str(e) for e in unknown]
        return out
    try:
        task = load_task(root)
    except TaskError as e:
        out.errors.append(str(e))
        return out
    ref = task.load_reference()
    out.errors += _run_reference(task, ref)
    bm = getattr(ref, "bytes_moved", None)
    if not callable(bm):
        out.warnings.append(f"{task.reference_path}: no bytes_moved(dims, dtype): no roofline (the profile, the "
                            "prompt's time floors and the tuner's stop rule go without one)")
    else:
        out.errors += _run_bytes_moved(task, bm)
    out.warnings += _source_changed(task)
    if not out.errors:
        shown = len(task.interpreter_shapes)
        out.ok = (f"{task.name} ({task.dsl}, {len(task.shapes)} shapes; make_inputs and reference ran on the "
                  f"{shown} interpreter shape{'s' if shown != 1 else ''} in {', '.join(task.dtypes)}) {root}")
    return out


def _run_reference(task: Task, ref) -> list[str]:
    import torch  # ~1 s: `--help` imports the command module that imports this one

    errors = []
    for dt in task.dtypes:
        for s in task.interpreter_shapes:
            where = f"interpreter shape {s.name!r} in {dt}"
            try:
                xs = ref.make_inputs(s.dims, getattr(torch, dt), 0, "cpu")
            except Exception as e:  # the task author's bug: say where
                errors.append(f"{task.reference_path}: make_inputs failed on {where}: {type(e).__name__}: {e}")
                continue
            try:
                out = ref.reference(*xs)
            except Exception as e:  # (as above)
                errors.append(f"{task.reference_path}: reference failed on {where}: {type(e).__name__}: {e}")
                continue
            outs = out if isinstance(out, (tuple, list)) else (out,)
            if not all(isinstance(o, torch.Tensor) for o in outs):
                errors.append(f"{task.reference_path}: reference returned something other than tensors on {where}")
            elif any(o.is_floating_point() and not torch.isfinite(o).all() for o in outs):
                errors.append(f"{task.reference_path}: reference's output has NaN/Inf on {where}: no kernel could "
                              "pass it")
    return errors


def _run_bytes_moved(task: Task, bm) -> list[str]:
    import torch  # (as above)

    errors = []
    for s in task.shapes + task.interpreter_shapes:
        try:
            b = bm(s.dims, getattr(torch, task.dtypes[0]))
            if not isinstance(b, (int, float)) or isinstance(b, bool) or b <= 0:
                raise ValueError(f"returned {b!r}, not a positive number of bytes")
        except Exception as e:  # the task author's bug: say where
            errors.append(f"{task.reference_path}: bytes_moved failed on shape {s.name!r}: {type(e).__name__}: {e}")
    return errors


def _source_changed(task: Task) -> list[str]:
    """The function a task was made from, changed in its file since (a task keeps its copy: say so)."""
    from harness.authoring.newtask import function_segment, sha256_of  # (newtask is the scaffolder: only here)

    src = task.source
    if src is None or not src.file or not src.sha256:
        return []
    original = (task.root / src.file).resolve()
    try:
        now = function_segment(original.read_text(encoding="utf-8"), src.function)
    except (OSError, UnicodeDecodeError):
        return []  # moved or gone: the task stands alone, there is nothing to compare
    if now is None:
        return [f"{original}: no `def {src.function}` any more; the task keeps its copy in reference.py"]
    if sha256_of(now) != src.sha256:
        return [f"{original}: {src.function} has changed since this task was made from it; the task checks "
                f"against its copy in reference.py (make it again with `tasks new --force` to take the change)"]
    return []

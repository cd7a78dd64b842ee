"""A task made of one op of the model step (`n` on the TUI's profile screen): the op's first call as
the step made it (harness.model.step_profile.StepRow.example) is written out as a small PyTorch file,
`FUNC` calling the op and `example_inputs()` making tensors of the step's shapes and dtypes, and that
file goes through `tasks new` (harness.authoring.newtask.create) as a person's own would. So the task
is what `warpsmith tasks new NAME --from FILE.py:FUNC` makes, and the file stays for the person to
edit and make again."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.authoring.newtask import Made, NewTaskError, Request, create

FLOATS = ("float32", "float16", "bfloat16", "float64")


@dataclass
class OpTask:
    made: Made
    source: Path     # the written FUNC file, kept for the person
    command: str     # the `tasks new` words that make it again


def task_name(example: dict) -> str:
    """`mm_2x64_64x64`: the op's name and its tensors' shapes, a valid task name."""
    op = example["op"].split(".")[1] if example["op"].count(".") >= 2 else example["op"]
    dims = ["x".join(str(d) for d in a["shape"]) or "scalar" for a in _tensors(example)]
    return re.sub(r"[^A-Za-z0-9_.-]", "_", "_".join([op.strip("_"), *dims]))[:80]


def _tensors(example: dict) -> list[dict]:
    return [a for a in example["args"] if isinstance(a, dict)]


def op_source(example: dict, origin: str) -> tuple[str, str]:
    """(the file's text, FUNC's name) for the op's call: tensors are FUNC's parameters, the other
    arguments constants of the call, as the step passed them."""
    op = example["op"]
    if not re.fullmatch(r"aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+", op):
        raise NewTaskError(f"{op}: only an aten op's call is made into a task")
    name = op.split(".")[1]
    if name.endswith("_") or example.get("kwargs", {}).get("out") is not None:
        raise NewTaskError(f"{op} works in place: a task needs an op that returns its result "
                           "(write the function around it and use `tasks new --from FILE.py:FUNC`)")
    tensors = _tensors(example)
    if not tensors:
        raise NewTaskError(f"{op} takes no tensor: nothing for a kernel to do")
    odd = sorted({a["dtype"] for a in tensors if a["dtype"] not in FLOATS})
    if odd:
        raise NewTaskError(f"{op} takes {', '.join(odd)} tensors: their values (indices, masks) need ranges "
                           "a profile doesn't record; write the function with its inputs and use "
                           "`tasks new --from FILE.py:FUNC`")
    # Every distinct size above 1 is a dim of the task (example_inputs' int keyword parameters), so
    # tasks new can make small interpreter shapes of a large step's, and --shapes can name them.
    sizes = sorted({d for a in tensors for d in a["shape"] if d > 1}, reverse=True)
    dim = {size: f"d{i}" for i, size in enumerate(sizes)}
    params, call, makes = [], [], []
    for a in example["args"]:
        if isinstance(a, dict):
            p = f"x{len(params)}"
            params.append(p)
            call.append(p)
            shape = ", ".join(dim.get(d, str(d)) for d in a["shape"]) + ("," if len(a["shape"]) == 1 else "")
            makes.append(f"torch.randn(({shape}), dtype=torch.{a['dtype']})")
        elif isinstance(a, list) and any(isinstance(x, dict) for x in a):
            raise NewTaskError(f"{op} takes a list of tensors: not made into a task here")
        else:
            call.append(repr(a))
    call += [f"{k}={v!r}" for k, v in example.get("kwargs", {}).items()]
    text = f'''"""{op} as one model step called it ({origin}); made by `n` on the profile screen.
Edit it and make the task again with the `tasks new` line in the task's task.toml."""
import torch


def {name}({", ".join(params)}):
    return torch.ops.{op}({", ".join(call)})


def example_inputs({", ".join(f"{n}={size}" for size, n in dim.items())}):
    return ({", ".join(makes)},)
'''
    return text, name


def make_op_task(example: dict | None, origin: str, where: Path, name: str | None = None) -> OpTask:
    """Writes `where/.warpsmith/ops/NAME.py` and the task `where/kernels/NAME` from it. NewTaskError
    (one line) for an op that can't be a task, or a task folder already there."""
    if not example:
        raise NewTaskError("this row has no call recorded (the task's own kernel, or arguments the profile "
                           "can't write down): nothing to make a task of")
    text, func = op_source(example, origin)
    name = name or task_name(example)
    src = where / ".warpsmith" / "ops" / f"{name}.py"
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(text)
    command = f"tasks new {name} --from {src}:{func}"
    made = create(Request(name, f"{src}:{func}", where / "kernels" / name, command=command))
    return OpTask(made, src, command)


def describe(example: dict[str, Any]) -> str:
    """`aten.mm.default(bfloat16[2, 64], bfloat16[64, 64])`, for the profile screen."""
    def one(a: Any) -> str:
        return f"{a['dtype']}{a['shape']}" if isinstance(a, dict) else repr(a)
    return f"{example['op']}({', '.join(one(a) for a in example['args'])})"

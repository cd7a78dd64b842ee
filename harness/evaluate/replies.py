"""What a reply from the child must look like, per op: every field the parent reads, its type and range.

Why: a reply is written by a process candidate code runs in. The channel's MAC proves a frame came
from that process, not that the harness's code wrote it: code that finds the channel's key in its
own memory can send a correctly signed reply with a string where a number belongs, a missing key,
NaN or a number of a thousand digits, and the readers (correctness, heldout, parent_clock,
timing_stage, runner) would die on it with a traceback and no verdict. ChildProcess.request checks
each reply here before any reader sees it; one that doesn't fit is a rejection, rule
`malformed-reply`, naming the op and the field.

Fields the parent doesn't read may be anything (a new field in child.py needs no change here until
the parent reads it, and then it gets a line here). The types come from pydantic (strict: no string
read as a number, no bool as a count); NaN and infinities never get this far, since the channel
refuses them when it parses a frame (channel.py).
"""
from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Optional

from pydantic import Field, StrictBool, StrictInt, StrictStr, TypeAdapter, ValidationError
# typing_extensions' TypedDict (a dependency of pydantic): pydantic needs it before Python 3.12.
from typing_extensions import Required, TypedDict

# Bounds far beyond anything honest, so a check of size or time never overflows or misleads.
Count = Annotated[StrictInt, Field(ge=0, le=2**53)]
Seconds = Annotated[float, Field(ge=0, le=1e10, allow_inf_nan=False, strict=True)]
Micros = Annotated[float, Field(ge=0, le=1e13, allow_inf_nan=False, strict=True)]
Number = Annotated[float, Field(ge=-1e15, le=1e15, allow_inf_nan=False, strict=True)]
Text = Annotated[StrictStr, Field(max_length=1 << 20)]
Rule = Annotated[StrictStr, Field(min_length=1, max_length=200)]


class Observation(TypedDict):
    rule: Rule
    message: Text


class _Failed(TypedDict, total=False):
    """Any op's failure: what went wrong, in words the verdict shows."""
    ok: Required[StrictBool]
    kind: Text
    detail: Optional[Text]
    error: Optional[Text]
    traceback: Optional[Text]
    child_s: Optional[Seconds]


class _Ok(TypedDict, total=False):
    ok: Required[StrictBool]
    child_s: Optional[Seconds]
    observed: list[Observation]
    notes: list[Text]


class Hello(_Ok, total=False):
    pid: Required[Annotated[StrictInt, Field(ge=1, le=2**31)]]
    startup_s: dict[StrictStr, Optional[Seconds]]


class Device(_Ok, total=False):
    name: Text
    l2_bytes: Optional[Count]
    sms: Optional[Count]
    copy_bw_Bps: Optional[Number]
    peak_tflops: Optional[Number]
    torch: Text
    triton: Text


class Imported(_Ok, total=False):
    patched: list[Text]
    watch_settings: Optional[Text]


class Called(_Ok, total=False):
    n_out: Required[Annotated[StrictInt, Field(ge=0, le=4096)]]
    launches: Count
    driver_launches: Count
    hook: StrictBool
    kernels: list[Text]
    current_stream_default: StrictBool


class RoleTimes(TypedDict, total=False):
    event_us: Required[list[Micros]]
    event_all_us: list[Micros]
    wall_us: Required[list[Micros]]
    bad: Required[Count]
    checked: Count
    graph_us: list[Micros]
    graph_error: Optional[Text]


class Timed(_Ok, total=False):
    roles: Required[dict[StrictStr, RoleTimes]]
    n_buffers: Count


class Prepared(_Ok, total=False):
    graph: StrictBool
    parts: dict[StrictStr, Seconds]  # where the prep's time went (parent_clock reads "refill")


class Batch(_Ok, total=False):
    n: Count
    event_us: Optional[Micros]
    child_us: Optional[Micros]
    out_bytes: Count


class Fetched(_Ok, total=False):
    n_out: Required[Annotated[StrictInt, Field(ge=0, le=4096)]]


class Memory(_Ok, total=False):
    free: Optional[Count]


_OK = {None: Hello, "device": Device, "import": Imported, "call": Called, "time": Timed, "prep": Prepared,
       "batch": Batch, "fetch": Fetched, "mem": Memory, "release": _Ok, "bye": _Ok}


@lru_cache(maxsize=None)
def _adapter(schema: Any) -> TypeAdapter:
    return TypeAdapter(schema)


def problem(op: str | None, req: dict | None, reply: Any, n_tensors: int = 0) -> str | None:
    """Why `reply` can't be the child's answer to `req` (op None: its hello), or None when it fits."""
    if not isinstance(reply, dict):
        return f"the reply is a {type(reply).__name__}, not an object"
    ok = reply.get("ok")
    if type(ok) is not bool:
        return f"field `ok`: {ok!r} is not true or false"
    if op not in _OK:
        return f"a reply to an op the harness doesn't know ({op!r})"
    try:
        _adapter(_OK[op] if ok else _Failed).validate_python(reply)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(the reply)"
        got = repr(err.get("input"))
        return f"field `{where}`: {err['msg'].lower()} (got {got[:80]}{'...' if len(got) > 80 else ''})"
    if ok and op == "time":  # each role the parent asked to time is in the answer
        missing = [r for r in (req or {}).get("roles", []) if r not in reply["roles"]]
        if missing:
            return f"field `roles`: no times for {', '.join(map(repr, missing))}"
    if ok and op in ("call", "fetch") and n_tensors > reply["n_out"]:
        return f"field `n_out`: {reply['n_out']} output(s) named, {n_tensors} sent"
    return None

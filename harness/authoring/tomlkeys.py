"""Where a key of a TOML file is written, and which known key a misspelt one was meant to be.

tomllib returns the data without positions, and an error a person can act on names the line. So the
text is scanned for what each line defines: a `[table]` or `[[array]]` header (tracking which element
of an array of tables is open) or a `key = value` at the start of a line (dotted keys included).
Lines inside a multi-line string or a multi-line array or inline table define nothing. A key path's
line is the first line that defines it or something under it; else the line of its longest prefix
that a line defines (a key inside `dims = { rows = 1 }` is on the line of `dims`).

Hand-written: tomllib keeps no positions, and tomlkit (a round-trip parser) keeps a document model
without line numbers; what is needed here is one pass over the lines.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

KeyPath = tuple  # a key path: str keys and int indices of arrays of tables, ("shapes", 1, "dims")

_BARE = r"[A-Za-z0-9_-]+"
_KEY = rf'(?:{_BARE}|"(?:[^"\\]|\\.)*"|\'[^\']*\')'
_DOTTED = rf"{_KEY}(?:\s*\.\s*{_KEY})*"
_KEY_LINE = re.compile(rf"^\s*({_DOTTED})\s*=")
_ARRAY_HEADER = re.compile(rf"^\s*\[\[\s*({_DOTTED})\s*\]\]")
_TABLE_HEADER = re.compile(rf"^\s*\[\s*({_DOTTED})\s*\]")
_PART = re.compile(_KEY)


def _parts(dotted: str) -> list[str]:
    out = []
    for m in _PART.finditer(dotted):
        k = m.group(0)
        out.append(k[1:-1] if k[0] in "\"'" else k)
    return out


def _code_of(line: str, state: dict) -> str:
    """The line without its strings' contents and its comment; updates state["ml"] (the delimiter of
    a multi-line string left open at the end of the line, or None)."""
    out, i, n = [], 0, len(line)
    while i < n:
        if state["ml"]:
            end = line.find(state["ml"], i)
            if end < 0:
                return "".join(out)
            i, state["ml"] = end + 3, None
            out.append('""')
            continue
        c = line[i]
        if c == "#":
            break
        if line.startswith('"""', i) or line.startswith("'''", i):
            state["ml"] = line[i:i + 3]
            i += 3
            continue
        if c in "\"'":
            j = i + 1
            while j < n and line[j] != c:
                j += 2 if c == '"' and line[j] == "\\" else 1
            out.append(line[i:j + 1])
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out)


def definitions(text: str) -> list[tuple[int, KeyPath]]:
    """(line number, full key path) for every line that defines a table or a key, in file order."""
    out: list[tuple[int, KeyPath]] = []
    current: KeyPath = ()
    arrays: dict[KeyPath, int] = {}  # resolved path of an array of tables -> index of its open element
    state = {"ml": None}
    depth = 0  # open [ and { of a value that goes on over lines

    def resolve(parts: list[str]) -> KeyPath:
        path: KeyPath = ()
        for p in parts:
            path = path + (p,)
            if path in arrays:
                path = path + (arrays[path],)
        return path

    for no, raw in enumerate(text.splitlines(), 1):
        in_string = state["ml"] is not None
        code = _code_of(raw, state)
        if in_string or depth:
            depth = max(depth + sum(code.count(c) for c in "[{") - sum(code.count(c) for c in "]}"), 0)
            continue
        if m := _ARRAY_HEADER.match(code):
            parts = _parts(m.group(1))
            parent = resolve(parts[:-1])
            key = parent + (parts[-1],)
            arrays[key] = arrays.get(key, -1) + 1
            current = key + (arrays[key],)
            out.append((no, current))
        elif m := _TABLE_HEADER.match(code):
            current = resolve(_parts(m.group(1)))
            out.append((no, current))
        elif m := _KEY_LINE.match(code):
            out.append((no, current + tuple(_parts(m.group(1)))))
            rest = code[m.end():]
            depth = max(sum(rest.count(c) for c in "[{") - sum(rest.count(c) for c in "]}"), 0)
    return out


def line_of(text: str, path: Iterable[Any]) -> int | None:
    """The line that defines `path` (or the first thing under it); else its longest defined prefix's."""
    path = tuple(path)
    defs = definitions(text)
    for no, p in defs:
        if p[:len(path)] == path:
            return no
    for k in range(len(path) - 1, 0, -1):
        for no, p in defs:
            if p == path[:k]:
                return no
    return None


def dotted(path: Iterable[Any]) -> str:
    """("shapes", 1, "dims") -> "shapes[1].dims": how the loader's errors name a field."""
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known word `word` most likely misspells (difflib's ratio at least 0.6), or None."""
    import difflib  # only when a key is wrong: every command loads this module at its start

    got = difflib.get_close_matches(word, list(known), n=1, cutoff=0.6)
    return got[0] if got else None


# -- a schema of known keys ----------------------------------------------------------------------

@dataclass(frozen=True)
class Table:
    """A table with these keys, each with its own schema (None: any value, not looked into)."""
    keys: dict[str, Any]


@dataclass(frozen=True)
class Array:
    """An array of tables, each of `item`'s schema."""
    item: Table


@dataclass(frozen=True)
class OpenTable:
    """A table whose keys are names (dtypes, a reference's arguments); `names`, when given, are the
    only valid ones; each value follows `value` (None: anything)."""
    value: Any = None
    names: tuple[str, ...] | None = None
    what: str = "name"


@dataclass(frozen=True)
class Unknown:
    path: KeyPath
    kind: str           # "table", "array of tables", "key" or the OpenTable's `what`
    suggestion: str | None
    known: tuple[str, ...]

    def label(self) -> str:
        name = dotted(self.path)
        return {"table": f"[{name}]", "array of tables": f"[[{name}]]"}.get(self.kind, name)

    def problem(self) -> str:
        if self.suggestion is not None:
            sug = self.path[:-1] + (self.suggestion,)
            mean = {"table": f"[{dotted(sug)}]", "array of tables": f"[[{dotted(sug)}]]"}.get(self.kind, self.suggestion)
            hint = f"did you mean {mean}?"
        else:
            hint = "known: " + ", ".join(self.known) if len(self.known) <= 12 else "not one this file may have"
        return f"unknown {'table' if self.kind == 'array of tables' else self.kind} ({hint})"


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return "array of tables"
    return "key"


def unknown_keys(data: Any, schema: Any, path: KeyPath = ()) -> list[Unknown]:
    """Every key of `data` the schema doesn't know, in the data's order."""
    out: list[Unknown] = []
    if isinstance(schema, Table) and isinstance(data, dict):
        for k, v in data.items():
            if k not in schema.keys:
                out.append(Unknown(path + (k,), _kind(v), closest(k, schema.keys), tuple(schema.keys)))
            elif schema.keys[k] is not None:
                out += unknown_keys(v, schema.keys[k], path + (k,))
    elif isinstance(schema, Array) and isinstance(data, list):
        for i, v in enumerate(data):
            out += unknown_keys(v, schema.item, path + (i,))
    elif isinstance(schema, OpenTable) and isinstance(data, dict):
        for k, v in data.items():
            if schema.names is not None and k not in schema.names:
                out.append(Unknown(path + (k,), schema.what, closest(k, schema.names), schema.names))
            elif schema.value is not None:
                out += unknown_keys(v, schema.value, path + (k,))
    return out

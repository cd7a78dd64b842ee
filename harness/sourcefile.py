"""Python source as the harness reads it: the file's bytes, once, decoded as UTF-8 and nothing else.

The static stage (tree-sitter) reads bytes as UTF-8, while Python's import honours a PEP 263
coding cookie (`# -*- coding: utf-7 -*-`) or a byte-order mark: under another encoding, lines the
guard reads as a comment are code (`+AAo-` is a newline in UTF-7). So a candidate (and any module
the harness imports from a file: a task's reference, the incumbent) is refused unless its bytes are
UTF-8 with no BOM and no cookie naming another encoding, and the child compiles exactly those bytes
decoded as UTF-8 (`compile()` on a str ignores any cookie), after checking they hash to what the
parent's static stage read. One reader, so nothing decodes a second time differently.
"""
from __future__ import annotations

import codecs
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

ENCODING_RULE = "source-encoding"
FIX = "write the file in UTF-8 without a coding declaration other than utf-8 (and without a byte-order mark)"
# PEP 263, as Python's tokenizer reads it (tokenize.cookie_re); looked for on lines 1 and 2 whatever
# line 1 holds (Python looks at line 2 only after a comment or blank line: refusing more is safe).
_COOKIE = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)", re.ASCII)
_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF8, "UTF-8"),
         (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


@dataclass
class SourceProblem:
    line: int      # 1-based
    col: int       # 1-based
    message: str
    rule: str = ENCODING_RULE


class SourceEncodingError(ImportError):
    """A file whose bytes are not plain UTF-8 Python source. str(): file:line: problem; the fix."""

    def __init__(self, path: Path | str, problem: SourceProblem):
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}:{problem.line}: {problem.message}")


def _line_of(data: bytes, offset: int) -> tuple[int, int]:
    line_start = data.rfind(b"\n", 0, offset) + 1
    return data.count(b"\n", 0, offset) + 1, offset - line_start + 1


def encoding_problem(data: bytes) -> SourceProblem | None:
    """Why `data` is not source every reader decodes the same way (as UTF-8), or None."""
    for bom, name in _BOMS:
        if data.startswith(bom):
            return SourceProblem(1, 1, f"the file starts with a {name} byte-order mark; {FIX}")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        line, col = _line_of(data, e.start)
        return SourceProblem(line, col, f"byte 0x{data[e.start]:02x} at line {line} is not UTF-8; {FIX}")
    for i, line in enumerate(data.split(b"\n", 2)[:2]):
        m = _COOKIE.match(line)
        if m is None:
            continue
        name = m.group(1).decode("ascii")
        try:
            same = codecs.lookup(name).name == "utf-8"
        except LookupError:
            same = False
        if not same:
            return SourceProblem(i + 1, m.start(1) + 1, f"line {i + 1} declares the source encoding {name!r} "
                                 f"(Python would decode the file as {name}, the guard reads UTF-8); {FIX}")
    if b"\0" in data:
        line, col = _line_of(data, data.index(b"\0"))
        return SourceProblem(line, col, f"a NUL byte at line {line}; {FIX}")
    return None


def decode(data: bytes, path: Path | str) -> str:
    """`data` as text, or SourceEncodingError naming the file, the line and the fix."""
    problem = encoding_problem(data)
    if problem is not None:
        raise SourceEncodingError(path, problem)
    return data.decode("utf-8")


def read_text(path: Path | str) -> str:
    """A source file's text, read the way the harness compiles it (bytes, UTF-8, no newline
    translation): for readers that edit or parse a source (the tuner, the script agent)."""
    return decode(Path(path).read_bytes(), path)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()

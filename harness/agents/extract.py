"""A candidate out of a model's answer: the submit_kernel tool (its schema is defined here), else exactly
one fenced python block; the source must parse and define the task's entry. When it can't be used,
ExtractionError says why, and feedback_for turns that into the next message to the model.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

SUBMIT_TOOL_NAME = "submit_kernel"
SUBMIT_TOOL_DESCRIPTION = (
    "Submit exactly one candidate: the complete Python source of the kernel module (it replaces the "
    "incumbent file as a whole and must define the task's entry function), and a short rationale.")
SUBMIT_TOOL_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "source": {"type": "string", "description": "Complete Python source of the candidate module."},
        "rationale": {"type": "string",
                      "description": "One or two sentences: what changed and why it should be faster."},
    },
    "required": ["source", "rationale"],
    "additionalProperties": False,
}

# A fence opens with ``` or ~~~ (3 or more) and an optional info string; it closes with the same run.
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
                    re.M | re.S)
PYTHON_LANGS = {"", "python", "py", "python3"}


@dataclass
class ToolCall:
    name: str
    arguments: str  # raw JSON text as streamed
    id: str = ""


@dataclass
class Candidate:
    source: str
    description: str
    via: str  # tool | fenced
    rationale: str = ""


class ExtractionError(Exception):
    """The answer held no usable candidate; str() is the feedback sent to the model."""


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]


def _unfence(source: str) -> str:
    """Models sometimes wrap the tool's source in a fence; take the inside."""
    blocks = fenced_blocks(source.strip() + "\n")
    if len(blocks) == 1 and source.lstrip().startswith(("```", "~~~")):
        return blocks[0][1]
    return source


def _check_source(source: str, entry: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ExtractionError(f"the source does not parse: line {e.lineno}: {e.msg}") from None
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if entry and entry not in names:
        raise ExtractionError(f"the source defines no top-level `{entry}` (the task's entry function)")


def _first_line(text: str, limit: int = 160) -> str:
    for line in text.strip().splitlines():
        line = line.strip().lstrip("#*- ").strip()
        if line and not line.startswith(("```", "~~~")):
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def extract_candidate(text: str, tool_calls: list[ToolCall], entry: str) -> Candidate:
    """A submit_kernel call if there is one, else exactly one fenced python block of the text."""
    calls = [c for c in tool_calls if c.name == SUBMIT_TOOL_NAME]
    others = [c.name for c in tool_calls if c.name != SUBMIT_TOOL_NAME]
    if len(calls) > 1:
        raise ExtractionError(f"you called {SUBMIT_TOOL_NAME} {len(calls)} times; call it exactly once")
    if calls:
        try:
            args = json.loads(calls[0].arguments or "{}")
        except json.JSONDecodeError as e:
            raise ExtractionError(f"the {SUBMIT_TOOL_NAME} arguments are not valid JSON ({e.msg} at "
                                  f"char {e.pos}); the answer may have been cut off") from None
        if not isinstance(args, dict):
            raise ExtractionError(f"the {SUBMIT_TOOL_NAME} arguments must be an object")
        source = args.get("source")
        if not isinstance(source, str) or not source.strip():
            raise ExtractionError(f"{SUBMIT_TOOL_NAME} was called without a non-empty `source` string")
        source = _unfence(source)
        _check_source(source, entry)
        rationale = args.get("rationale") if isinstance(args.get("rationale"), str) else ""
        desc = _first_line(rationale) or _first_line(text) or "candidate from the model"
        return Candidate(source, desc, "tool", rationale.strip())
    if others:
        raise ExtractionError(f"unknown tool {others[0]!r}; the only tool is {SUBMIT_TOOL_NAME}")
    blocks = fenced_blocks(text)
    python = [b for lang, b in blocks if lang in PYTHON_LANGS]
    if not python:
        what = "no fenced code block" if not blocks else f"no python block (found: {', '.join(l or 'untagged' for l, _ in blocks)})"
        raise ExtractionError(f"the answer has {what}")
    if len(python) > 1:
        raise ExtractionError(f"the answer has {len(python)} python code blocks; give exactly one, "
                              "holding the complete module")
    source = python[0]
    _check_source(source, entry)
    before = text.split("```", 1)[0] if "```" in text else ""
    desc = _first_line(before) or "candidate from the model"
    return Candidate(source, desc, "fenced", before.strip())


def feedback_for(problem: str, entry: str, tools: bool) -> str:
    how = (f"call the {SUBMIT_TOOL_NAME} tool once with the complete module source" if tools
           else "put the complete module in exactly one ```python fenced block")
    return (f"Your answer could not be used: {problem}. Reply again with exactly one candidate: {how}. "
            f"It must define `{entry}` and be the whole file, not a diff.")

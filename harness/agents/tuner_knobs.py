"""Tunable literals in a kernel's source, found with tree-sitter (nothing is imported or run).

  - launch keyword arguments of `kernel[grid](...)` calls: num_warps, num_stages, constexpr blocks;
  - module-level integer constants in UPPER_CASE (BLOCK = 1024).
"""
from __future__ import annotations

from dataclasses import dataclass

import tree_sitter_python
from tree_sitter import Language, Parser

PY = Language(tree_sitter_python.language())

WARPS = [1, 2, 4, 8, 16, 32]


@dataclass(frozen=True)
class Knob:
    key: str  # "const:BLOCK" or "launch0:num_warps"
    name: str
    value: int
    start: int  # byte offsets of the literal in the source
    end: int


def _int_literal(node) -> int | None:
    if node is not None and node.type == "integer":
        try:
            return int(node.text.decode(), 0)
        except ValueError:
            return None
    return None


def find_knobs(source: str) -> list[Knob]:
    tree = Parser(PY).parse(source.encode())
    knobs: list[Knob] = []
    for stmt in tree.root_node.children:
        node = stmt.children[0] if stmt.type == "expression_statement" and stmt.children else None
        if node is not None and node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            value = _int_literal(right)
            name = left.text.decode() if left is not None and left.type == "identifier" else ""
            if value is not None and name.isupper():
                knobs.append(Knob(f"const:{name}", name, value, right.start_byte, right.end_byte))
    launch = 0
    stack = [tree.root_node]
    calls = []
    while stack:
        n = stack.pop()
        if n.type == "call" and n.child_by_field_name("function") is not None \
                and n.child_by_field_name("function").type == "subscript":
            calls.append(n)
        stack.extend(reversed(n.children))
    for call in sorted(calls, key=lambda c: c.start_byte):
        args = call.child_by_field_name("arguments")
        for arg in args.children if args is not None else []:
            if arg.type != "keyword_argument":
                continue
            name = arg.child_by_field_name("name").text.decode()
            value = _int_literal(arg.child_by_field_name("value"))
            if value is not None and (name in ("num_warps", "num_stages") or name.isupper()):
                v = arg.child_by_field_name("value")
                knobs.append(Knob(f"launch{launch}:{name}", name, value, v.start_byte, v.end_byte))
        launch += 1
    return knobs


def kind_of(knob: Knob) -> str:
    """"num_warps", "num_stages" or "block". A module constant named like the launch option it
    feeds (NUM_WARPS = 4, STAGES = 2) moves like that option, not like a block size."""
    name = knob.name.lower()
    return "num_warps" if name.endswith("warps") else "num_stages" if name.endswith("stages") else "block"


def neighbours(knob: Knob) -> list[int]:
    v = knob.value
    kind = kind_of(knob)
    if kind == "num_warps":
        i = WARPS.index(v) if v in WARPS else None
        return [WARPS[j] for j in ((i + 1, i - 1) if i is not None else ()) if 0 <= j < len(WARPS)]
    if kind == "num_stages":
        return [x for x in (v + 1, v - 1) if 1 <= x <= 6]
    if v > 0 and v & (v - 1) == 0:  # block sizes: tl.arange needs powers of two
        return [x for x in (v * 2, v // 2) if 16 <= x <= 65536]
    return []


def apply(source: str, changes: dict[Knob, int]) -> str:
    data = source.encode()
    for knob, value in sorted(changes.items(), key=lambda kv: -kv[0].start):
        data = data[:knob.start] + str(value).encode() + data[knob.end:]
    return data.decode()


def config_of(knobs: list[Knob]) -> dict[str, int]:
    return {k.key: k.value for k in knobs}

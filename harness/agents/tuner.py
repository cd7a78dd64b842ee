"""The offline default agent: finds tunable constants with tree-sitter and hill-climbs over them.

Tunables are integer literals a kernel engineer would turn by hand:
  - launch keyword arguments of `kernel[grid](...)` calls: num_warps, num_stages, constexpr blocks;
  - module-level integer constants in UPPER_CASE (BLOCK = 1024).
One knob changes per proposal, always from the current best, never to a configuration already
tried (tries are rebuilt from the journal on resume). It stops when the best has no untried neighbour.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import tree_sitter_python
from tree_sitter import Language, Parser

from harness.agents.base import AgentEvent, Exhausted, Proposal, ProposalContext, ReasoningChunk

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


WHY = {
    "num_warps": {
        "up": "more warps per program hide more memory latency and split the row reduction wider",
        "down": "fewer warps cut register pressure and synchronisation cost in the reductions",
    },
    "num_stages": {
        "up": "a deeper software pipeline overlaps the next loads with this block's math",
        "down": "fewer stages free shared memory and registers for more resident programs",
    },
    "block": {
        "up": "a wider block halves the loop trip count and issues wider vector loads",
        "down": "a narrower block lowers register use per thread, raising occupancy",
    },
}


def explain(knob: Knob, new: int) -> str:
    direction = "up" if new > knob.value else "down"
    family = WHY[kind_of(knob)]
    return f"{knob.name} {knob.value} → {new}: {family[direction]}."


class TunerAgent:
    name = "tuner"
    model = ""
    reads_prompt = False  # it edits constants; a measured profile in the prompt would go unread

    def propose(self, ctx: ProposalContext) -> Iterator[AgentEvent]:
        knobs = find_knobs(ctx.incumbent_source)
        if not knobs:
            yield Exhausted("tuner: no tunable constants found in the incumbent (launch kwargs or UPPER_CASE ints)")
            return
        base = config_of(knobs)
        # Both ends of every earlier move count as tried: the config proposed and the one it left.
        tried = [c for a in ctx.history for c in (a.meta.get("config"), a.meta.get("from")) if c]
        tried_keys = {tuple(sorted(c.items())) for c in tried}
        tried_keys.add(tuple(sorted(base.items())))
        options = []
        for knob in knobs:
            for value in neighbours(knob):
                config = {**base, knob.key: value}
                if tuple(sorted(config.items())) not in tried_keys:
                    options.append((knob, value, config))
        summary = ", ".join(f"{k.name}={k.value}" for k in knobs)
        yield ReasoningChunk(f"Incumbent configuration: {summary}. ")
        last = ctx.history[-1] if ctx.history else None
        if last is not None:
            yield ReasoningChunk(f"Last try ({last.description}) ended {last.outcome}. ")
        if not options:
            yield ReasoningChunk("Every single-knob neighbour of the incumbent has been tried.\n")
            yield Exhausted("tuner: no untried neighbour of the incumbent is left")
            return
        knob, value, config = options[0]
        yield ReasoningChunk(f"{len(options)} untried neighbour{'' if len(options) == 1 else 's'} left. Trying {explain(knob, value)}\n")
        yield Proposal(apply(ctx.incumbent_source, {knob: value}), f"{knob.name} {knob.value} -> {value}",
                       meta={"config": config, "from": base, "knob": knob.key})

"""What the offline tuner can take from a person's words (ideas, veto reasons), and what it can't.

It is no language model: it reads three forms and says so for everything else.
  - a tuned name with a value: "BLOCK=2048", "num_warps 16", "set TILE to 8192"  -> pinned
  - a direction: "more warps", "fewer stages", "bigger/larger/wider block(s)", "smaller tile" -> preferred
  - a veto reason on a tuner candidate -> that configuration and its neighbours (one step on one
    knob, same variant) are not proposed again
Anything else in a sentence is reported as not usable, with a pointer to `m` (an LLM agent reads it).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

PIN = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*(?:=|:|\bto\b|\bat\b|\s)\s*(\d+)\b")
MORE = r"(more|higher|bigger|larger|wider|increase|raise|up)"
LESS = r"(fewer|less|lower|smaller|narrower|decrease|reduce|down)"
FAMILY = {"warps": "num_warps", "warp": "num_warps", "stages": "num_stages", "stage": "num_stages",
          "pipeline": "num_stages", "blocks": "block", "block": "block", "tile": "block", "tiles": "block",
          "rows": "block"}


WORDS = {"num_warps": {"up": "more warps", "down": "fewer warps"},
         "num_stages": {"up": "more stages", "down": "fewer stages"},
         "block": {"up": "bigger blocks/tiles", "down": "smaller blocks/tiles"}}


@dataclass
class Reading:
    pins: dict[str, int] = field(default_factory=dict)  # tuned name -> value
    prefer: dict[str, str] = field(default_factory=dict)  # kind (num_warps|num_stages|block) -> up|down
    excluded: set[tuple] = field(default_factory=set)  # (variant, config items) not to propose
    took: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)


def _direction(text: str) -> dict[str, str]:
    out = {}
    low = text.lower()
    for word, kind in FAMILY.items():
        if re.search(rf"\b{MORE}\s+(?:\w+\s+)?{word}\b", low):
            out[kind] = "up"
        elif re.search(rf"\b{LESS}\s+(?:\w+\s+)?{word}\b", low):
            out[kind] = "down"
    return out


def read(ideas: list[str], vetoes: list[tuple[dict, str]], names: set[str], neighbourhood) -> Reading:
    """`names`: every tuned name of every variant. `vetoes`: (the vetoed try's meta, the reason).
    `neighbourhood(variant, config)` gives the configurations one step from a vetoed one."""
    r = Reading()
    lower = {n.lower(): n for n in names}
    for idea in ideas:
        took = []
        for m in PIN.finditer(idea):
            name = lower.get(m.group(1).lower())
            if name is not None:
                r.pins[name] = int(m.group(2))
                took.append(f"{name}={m.group(2)}")
        for kind, way in _direction(idea).items():
            r.prefer[kind] = way
            took.append(WORDS[kind][way])
        if took:
            r.took.append(f"idea {idea!r}: {', '.join(took)}")
        else:
            r.unused.append(f"idea {idea!r}")
    for meta, reason in vetoes:
        variant, config = meta.get("variant"), meta.get("config")
        if variant and isinstance(config, dict):
            around = neighbourhood(variant, config)
            r.excluded.update(around)
            label = ", ".join(f"{k}={v}" for k, v in config.items())
            r.took.append(f"veto of {variant} {label} ({reason!r}): it and {len(around) - 1} neighbour(s) excluded")
            extra = _direction(reason)
            for kind, way in extra.items():
                r.prefer[kind] = way
        else:
            r.unused.append(f"veto reason {reason!r} (on a candidate the tuner did not write)")
    return r

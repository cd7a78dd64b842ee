"""Status line: decision-mode badge, task, agent and model, packs, iteration, tokens, cost, GPU.

One line at any width: when the full line does not fit, lower-priority fields are shortened, then
dropped, in this order: packs (count), tokens (k/M), GPU (short name), packs, tokens (cost stays),
agent (clipped), GPU, agent, phase. Mode badge, task, iteration and cost stay; the rest is cut
with an ellipsis only when even that does not fit. Once the run has ended, the iteration is the
last one that had a candidate.
"""
from __future__ import annotations

import re

from rich.text import Text
from textual import events
from textual.widgets import Static

from harness.evaluate.sandbox import disabled_by_user
from tui.state import RunState

# (field, level) applied one after the other until the line fits.
_SHRINK = (("packs", 1), ("tokens", 1), ("device", 1), ("packs", 2), ("tokens", 2), ("agent", 1),
           ("device", 2), ("agent", 2), ("phase", 1))
_AGENT_CLIP = 16
_VENDOR = re.compile(r"^(?:NVIDIA|AMD|Intel)\s+(?:GeForce\s+|Radeon\s+)?", re.I)


def _si(n: int) -> str:
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"


def short_device(device: str) -> str:
    """'NVIDIA H200' -> 'H200', 'NVIDIA GeForce RTX 4090' -> 'RTX 4090', 'cpu (Triton interpreter)' -> 'cpu'."""
    words = _VENDOR.sub("", re.sub(r"\s*\(.*?\)", "", device)).split()
    if not words:
        return device or "-"
    return words[0] if any(c.isdigit() for c in words[0]) else " ".join(words[:2])


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def shown_iteration(state: RunState) -> int:
    """The iteration to show: the current one while the run goes on; once it has ended, the last
    one that had a candidate (an iteration started but ended before proposing shows nothing)."""
    if state.phase != "ended":
        return state.iteration
    return state.candidate.iteration if state.candidate is not None else 0


def _build(state: RunState, level: dict[str, int]) -> Text:
    t = Text()
    badge = " AUTO " if state.mode == "auto" else " MANUAL "
    t.append(badge, style="bold black on yellow" if state.mode == "auto" else "bold white on blue")
    if state.paused:
        t.append(" PAUSED ", style="bold black on magenta")

    if disabled_by_user():  # --no-sandbox: candidate code runs with the person's privileges
        t.append(" NO SANDBOX ", style="bold white on red")
    phase = state.phase
    if phase == "evaluating" and state.call_timeout_s:  # how long a hang can hold the run
        phase += f" ≤{state.call_timeout_s:g}s/call"
    t.append(f" {phase} " if level["phase"] == 0 else " ", style="italic")
    t.append("│ ", style="dim")
    t.append(state.task or "-", style="bold")
    it = shown_iteration(state)
    if it:
        t.append(f" #{it}")
    agent = state.agent or "-"
    parts = [
        (agent, _clip(agent, _AGENT_CLIP), None)[level["agent"]],
        ("packs " + (",".join(state.packs) if state.packs else "none"),
         f"packs {len(state.packs)}" if state.packs else "packs none", None)[level["packs"]],
        (f"tok {state.input_tokens}/{state.output_tokens} ${state.cost_usd:.2f}",
         f"tok {_si(state.input_tokens)}/{_si(state.output_tokens)} ${state.cost_usd:.2f}",
         f"${state.cost_usd:.2f}")[level["tokens"]],
        (state.device or "-", short_device(state.device), None)[level["device"]],
    ]
    for p in parts:
        if p is not None:
            t.append(f" │ {p}")
    return t


def status_text(state: RunState, width: int | None = None) -> Text:
    """The status line; with `width`, shortened (see the module doc) to fit that many cells."""
    level = {"phase": 0, "agent": 0, "packs": 0, "tokens": 0, "device": 0}
    t = _build(state, level)
    if not width:
        return t  # width unknown (not laid out yet): everything
    for name, lvl in _SHRINK:
        if t.cell_len <= width:
            break
        level[name] = lvl
        t = _build(state, level)
    t.no_wrap, t.overflow = True, "ellipsis"
    t.truncate(width, overflow="ellipsis")
    return t


class StatusBar(Static):
    _state: RunState | None = None

    def show(self, state: RunState) -> None:
        self._state = state
        self.update(status_text(state, self.content_size.width))

    def on_resize(self, event: events.Resize) -> None:
        if self._state is not None:  # event.size counts the gutter; the text gets the content width
            self.update(status_text(self._state, self.content_size.width))

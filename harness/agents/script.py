"""Replays a folder of prepared candidates, in name order (demos, tests, red-team replays).

Each `NN_name.py` is one proposal; an optional `NN_name.md` beside it is streamed as the
reasoning, in small chunks, so the UI sees what a streaming model would look like.
"""
from __future__ import annotations

import ast
import time
from pathlib import Path
from typing import Iterator

from harness.agents.base import AgentEvent, Exhausted, Proposal, ProposalContext, ReasoningChunk


class ScriptAgent:
    name = "script"
    reads_prompt = False  # replays prepared files

    def __init__(self, folder: Path, chunk_delay_s: float = 0.0, chunk_chars: int = 24):
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise FileNotFoundError(f"{self.folder}: script agent needs a folder of candidate .py files")
        self.files = sorted(self.folder.glob("*.py"))
        self.model = self.folder.name
        self.chunk_delay_s, self.chunk_chars = chunk_delay_s, chunk_chars

    def propose(self, ctx: ProposalContext) -> Iterator[AgentEvent]:
        done = {a.meta.get("script_file") for a in ctx.history}
        todo = [f for f in self.files if f.name not in done]
        if not todo:
            yield Exhausted(f"script: all {len(self.files)} candidates in {self.folder} replayed")
            return
        f = todo[0]
        notes = f.with_suffix(".md")
        if notes.is_file():
            text = notes.read_text()
            for i in range(0, len(text), self.chunk_chars):
                if ctx.cancel.is_set():
                    return
                yield ReasoningChunk(text[i:i + self.chunk_chars])
                if self.chunk_delay_s:
                    time.sleep(self.chunk_delay_s)
        # Decoded as is (no line-ending translation, not the locale's encoding): what the static stage judges.
        source = f.read_bytes().decode("utf-8")
        yield Proposal(source, _describe(f, source), meta={"script_file": f.name})


def _describe(path: Path, source: str) -> str:
    try:
        doc = ast.get_docstring(ast.parse(source))
    except SyntaxError:
        doc = None
    return doc.strip().splitlines()[0] if doc else path.stem

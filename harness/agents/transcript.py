"""Transcripts: one proposal's prompt, reasoning, answer, usage and errors as a Markdown file, keys redacted."""
from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from harness.agents.config import redact


class Transcript:
    """One proposal's prompt, reasoning and answer as Markdown, written when the proposal ends
    (a finally block, so a cancelled or failed proposal is on disk too). Keys are redacted."""

    _lock = threading.Lock()
    _seq = 0

    def __init__(self, folder: Path | None, label: str, model: str, iteration: int,
                 secrets: tuple[str, ...] = ()):
        self.folder, self.label, self.model, self.iteration = folder, label, model, iteration
        self.secrets = secrets
        self.parts: list[tuple[str, str]] = []
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.path: Path | None = None
        if folder is not None:
            with Transcript._lock:
                Transcript._seq += 1
                seq = Transcript._seq
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
            self.path = Path(folder) / f"iter-{iteration:04d}-{safe}-{os.getpid()}-{seq:03d}.md"

    def add(self, title: str, text: str) -> None:
        self.parts.append((title, text))

    def write(self) -> Path | None:
        if self.path is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        out = [f"# {self.label} · {self.model} · iteration {self.iteration}", "",
               f"started {self.started}, ended {time.strftime('%Y-%m-%dT%H:%M:%S%z')}", ""]
        for title, text in self.parts:
            fence = "````" if "```" in text else "```"
            out += [f"## {title}", "", fence + "text", text.rstrip("\n"), fence, ""]
        self.path.write_text(redact("\n".join(out), self.secrets), encoding="utf-8")
        return self.path

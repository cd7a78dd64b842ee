"""A session folder: `.warpsmith/sessions/<id>/` under the current directory.

    session.json    what was asked for (task, agent, packs, options), written once, updated on change
    journal.jsonl   every event, append-only (harness.journal); the pack selection is its last
                    PacksSelected record (session.json's `packs` mirrors it)
    results.tsv     the table view of the journal
    repo/           git: candidates on refs/candidates/NNNN, best on refs/heads/best (harness.workspace)
    transcripts/    each LLM proposal's prompt, reasoning and answer
"""
from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.journal import Journal, write_results_tsv
from harness.workspace import Workspace


PACKS_SELECTED = "PacksSelected"


def sessions_root(base: Path | None = None) -> Path:
    return (base or Path.cwd()) / ".warpsmith" / "sessions"


@dataclass
class SessionMeta:
    id: str
    task: str
    agent: str
    created: float
    packs: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=dict)
    ideas: list[str] = field(default_factory=list)


class SessionError(Exception):
    pass


class Session:
    def __init__(self, root: Path, meta: SessionMeta):
        self.root = root
        self.meta = meta
        self.journal = Journal(root / "journal.jsonl")
        self.workspace = Workspace(root / "repo")
        (root / "transcripts").mkdir(exist_ok=True)
        (root / "work").mkdir(exist_ok=True)

    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def transcripts(self) -> Path:
        return self.root / "transcripts"

    @property
    def work(self) -> Path:
        return self.root / "work"

    @classmethod
    def create(cls, task_name: str, agent: str, baseline_source: str, base: Path | None = None,
               packs: list[str] | None = None, options: dict | None = None) -> "Session":
        sid = time.strftime("%Y%m%d-%H%M%S") + f"-{task_name}-{secrets.token_hex(2)}"
        root = sessions_root(base) / sid
        root.mkdir(parents=True)
        meta = SessionMeta(sid, task_name, agent, time.time(), list(packs or []), dict(options or {}))
        Workspace.create(root / "repo", baseline_source)
        s = cls(root, meta)
        s.save_meta()
        return s

    @classmethod
    def open(cls, sid: str, base: Path | None = None) -> "Session":
        """The session whose id is `sid`, or the one session whose id starts with it."""
        root = sessions_root(base) / sid
        if not (root / "session.json").is_file():
            every = list_sessions(base)
            matches = [p for p in every if sid and p.name.startswith(sid)]
            if len(matches) > 1:
                raise SessionError(f"session id {sid!r} is ambiguous: it starts {len(matches)} sessions ("
                                   f"{', '.join(p.name for p in matches)}); give more of it")
            if not matches:
                known = ", ".join(p.name for p in every) or "none"
                raise SessionError(f"no session {sid!r} under {sessions_root(base)} (known: {known})")
            root = matches[0]
        try:
            meta = SessionMeta(**json.loads((root / "session.json").read_text()))
        except (json.JSONDecodeError, TypeError) as e:
            raise SessionError(f"{root / 'session.json'}: unreadable ({e})") from None
        return cls(root, meta)

    def save_meta(self) -> None:
        # The UI thread (picker, agent switch) and the loop thread (a picked pack gone from disk)
        # both save: a temp file of each writer's own, so neither replaces the other's half-written one.
        fd, tmp = tempfile.mkstemp(prefix="session.json.", suffix=".tmp", dir=self.root)
        with os.fdopen(fd, "w") as f:
            f.write(json.dumps(asdict(self.meta), indent=2))
        os.replace(tmp, self.root / "session.json")

    def record(self, record: dict) -> None:
        self.journal.append(record)
        if record.get("kind") == "Decision":
            write_results_tsv(self.root / "results.tsv", self.journal.read())

    # -- pack selection: the journal is its record ------------------------------------------------
    def set_packs(self, ids: list[str]) -> None:
        """A new pack selection (the TUI's picker, flags on start): journalled as PacksSelected,
        the record a resume reads, and mirrored in session.json for the running loop."""
        self.record({"kind": PACKS_SELECTED, "packs": list(ids)})
        self.meta.packs = list(ids)
        self.save_meta()

    def journalled_packs(self) -> list[str] | None:
        """The last PacksSelected in the journal; None when none was journalled (a session from
        before selections were journalled: see legacy_packs)."""
        last = None
        for r in self.journal.iter():
            if r.get("kind") == PACKS_SELECTED and isinstance(r.get("packs"), list):
                last = [str(i) for i in r["packs"]]
        return last

    def legacy_packs(self) -> list[str] | None:
        """The selection a session from before selections were journalled kept in packs.json;
        None when it has none."""
        from harness.packs import Selection

        return list(Selection.load(self.root).ids) if (self.root / Selection.FILE).is_file() else None


def list_sessions(base: Path | None = None) -> list[Path]:
    root = sessions_root(base)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "session.json").is_file())

"""A session folder: `.warpsmith/sessions/<id>/` under the current directory.

    session.json    what was asked for (task, agent, packs, options), written once, updated on change
    journal.jsonl   every event, append-only (harness.sessions.journal); the pack selection is its last
                    PacksSelected record (session.json's `packs` mirrors it)
    results.tsv     the table view of the journal
    repo/           git: candidates on refs/candidates/NNNN, best on refs/heads/best (harness.sessions.workspace)
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
from typing import TYPE_CHECKING, Any

from harness.events import DecisionMode, IdeaFromProfile, IdeasChanged, PacksSelected
from harness.sessions.history import SessionHistory
from harness.invocation import command
from harness.sessions.journal import Journal, write_results_tsv
from harness.authoring.packs import Selection
from harness.sessions.workspace import Workspace

if TYPE_CHECKING:  # (types only: the step profile's module is loaded when a profile is made)
    from harness.model.step_profile import StepProfile, StepRow


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
        """The session `sid` names (see find_session: an id, `latest`, a unique prefix or part)."""
        root = find_session(sid, base)
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

    # -- what a person changes mid-session: journalled here, so no front end writes the journal ---
    def set_ideas(self, ideas: list[str]) -> None:
        """The person's standing directions (the TUI's `i`): in session.json for the next prompt, and
        journalled (IdeasChanged)."""
        self.meta.ideas = list(ideas)
        self.save_meta()
        self.record(IdeasChanged(list(ideas)).to_json())

    def set_decision_mode(self, mode: str) -> None:
        """A switch between deciding each candidate and following the recommendation (the TUI's `a`:
        manual | auto), journalled before any decision the new mode makes."""
        self.record(DecisionMode(mode).to_json())

    def idea_from_profile(self, idea: str, row: StepRow, profile: StepProfile) -> None:
        """An idea a person started from a line of the step profile, journalled with the line and what
        was profiled (IdeaFromProfile), so the idea traces back to its evidence."""
        self.record(IdeaFromProfile(idea, asdict(row), profile.workload, profile.device, profile.measured,
                                    profile.candidate).to_json())

    # -- pack selection: the journal is its record ------------------------------------------------
    def set_packs(self, ids: list[str]) -> None:
        """A new pack selection (the TUI's picker, flags on start): journalled as PacksSelected,
        the record a resume reads, and mirrored in session.json for the running loop."""
        self.record(PacksSelected(list(ids)).to_json())
        self.meta.packs = list(ids)
        self.save_meta()

    def journalled_packs(self) -> list[str] | None:
        """The last PacksSelected in the journal; None when none was journalled (a session from
        before selections were journalled: see legacy_packs)."""
        return SessionHistory.of(self).packs_selected

    def legacy_packs(self) -> list[str] | None:
        """The selection a session from before selections were journalled kept in packs.json;
        None when it has none."""
        return list(Selection.load(self.root).ids) if (self.root / Selection.FILE).is_file() else None


def list_sessions(base: Path | None = None) -> list[Path]:
    """Session folders, oldest first (ids start with their creation time)."""
    root = sessions_root(base)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "session.json").is_file())


def no_sessions_message(base: Path | None = None) -> str:
    """What an empty listing says: where it looked, and how to start."""
    return (f"no sessions under {sessions_root(base)}; start one with `{command('run TASK')}` "
            f"(`{command('tasks list')}` names the tasks)")


def _created(root: Path) -> tuple[float, str]:
    # session.json's creation time: two sessions started in the same second sort by it, not by task name.
    try:
        return float(json.loads((root / "session.json").read_text()).get("created", 0.0)), root.name
    except (OSError, ValueError, TypeError, AttributeError):
        return 0.0, root.name


def find_session(sid: str, base: Path | None = None) -> Path:
    """The folder of the session `sid` names: its full id; `latest`, the newest; else the one id
    that starts with `sid`; else the one id that contains it (ids are DATE-TIME-TASK-TAG, and the tag
    at the end is what people remember: `3583`). SessionError, in one line, otherwise: no session
    (naming the folder looked in), or several (naming each)."""
    root = sessions_root(base)
    if sid and sid not in (".", "..") and "/" not in sid and (root / sid / "session.json").is_file():
        return root / sid
    every = list_sessions(base)
    if not every:
        raise SessionError(f"no session {sid!r}: {no_sessions_message(base)}")
    if sid == "latest":
        return max(every, key=_created)
    matches = [p for p in every if sid and p.name.startswith(sid)] or [p for p in every if sid and sid in p.name]
    if len(matches) > 1:
        raise SessionError(f"session id {sid!r} is ambiguous: it matches {len(matches)} sessions ("
                           f"{', '.join(p.name for p in matches)}); give more of it")
    if not matches:
        shown = [p.name for p in every[-5:]]
        more = f" and {len(every) - 5} older: `{command('sessions list')}`" if len(every) > 5 else ""
        raise SessionError(f"no session {sid!r} under {root} (newest: {', '.join(reversed(shown))}{more}; "
                           "or `latest`)")
    return matches[0]

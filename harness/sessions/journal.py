"""The session journal: append-only JSON lines, fsync'd, the one source of truth for resume.

Every event the loop emits is a line; a decision is written (and fsync'd) before the loop acts on
it. A kill mid-write leaves at most one torn last line, which `read` skips and reports.
`results.tsv` is a view rebuilt from the journal, so it can never disagree with it.
"""
from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from harness.evaluate.records import Verdict
from harness.sessions.history import SessionHistory

# The journal's schema version, in a first record {"kind": "JournalSchema", "version": N} written when a
# journal is created. Journals written before it have none: version 0, the same records (they load as
# they are; tests/fixtures/journal_v0). A reader that must treat versions apart asks `Journal.schema`.
SCHEMA_VERSION = 1
SCHEMA_KIND = "JournalSchema"

RESULTS_HEADER = ["iteration", "commit", "verdict", "geomean_speedup", "decision", "description", "outcome"]


class Journal:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._lock = threading.Lock()  # proposals and evaluations may emit from several threads
        self.torn_lines: list[int] = []
        self.schema = 0  # set by reading: SCHEMA_VERSION for a journal this version made, 0 before

    def append(self, record: dict[str, Any]) -> None:
        line = json.dumps({"t": round(time.time(), 3), **record}, default=str, separators=(",", ":"))
        with self._lock:
            # O_APPEND so concurrent writers never interleave inside a line; fsync so a power cut
            # or kill -9 right after a decision can't lose it.
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_size == 0:  # a new journal: its first line says its schema
                    head = json.dumps({"kind": SCHEMA_KIND, "version": SCHEMA_VERSION}, separators=(",", ":"))
                    os.write(fd, (head + "\n").encode())
                os.write(fd, (line + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)

    def read(self) -> list[dict[str, Any]]:
        """The records, without the schema line (Journal.schema has it)."""
        return list(self.iter())

    def iter(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        self.torn_lines = []
        self.schema = 0
        with self.path.open() as f:
            for n, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    self.torn_lines.append(n)
                    continue
                if n == 1 and isinstance(record, dict) and record.get("kind") == SCHEMA_KIND:
                    self.schema = int(record.get("version") or 0)
                    continue
                yield record


def results_rows(records: list[dict[str, Any]]) -> list[dict[str, str]]:
    """One row per decided iteration: what the person (or policy) did with each candidate, and
    its outcome in the session's tally (Verdict.tally)."""
    rows = []
    for s in SessionHistory.fold(records).decided:
        r, p, v = s.decision, s.proposal or {}, s.verdict or Verdict.empty()
        g = v.geomean_speedup
        verdict = "accepted" if v.accepted else f"rejected:{v.stage_shown}"
        rows.append({
            "iteration": str(s.iteration),
            "commit": (r.get("commit") or p.get("commit", ""))[:12],
            "verdict": verdict,
            "geomean_speedup": f"{g:.4f}" if isinstance(g, (int, float)) else "n/a",
            "decision": r["action"] + (" (override)" if r.get("override") else ""),
            "description": " ".join(p.get("description", "").split())[:120],
            "outcome": v.tally(r["action"]),
        })
    return rows


def write_results_tsv(path: Path, records: list[dict[str, Any]]) -> None:
    rows = results_rows(records)
    tmp = path.with_suffix(".tsv.tmp")
    with tmp.open("w") as f:
        f.write("\t".join(RESULTS_HEADER) + "\n")
        for row in rows:
            f.write("\t".join(row[h].replace("\t", " ") for h in RESULTS_HEADER) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)  # atomic: a reader never sees half a table

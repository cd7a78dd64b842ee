"""A session's git repository: every candidate a commit on its own ref, `best` advances on keep.

Candidates are committed with plumbing (hash-object / mktree / commit-tree / update-ref) rather than
porcelain so that nothing depends on the index or working tree state: a kill between two git calls
leaves at worst an unreferenced object, never a half-applied checkout. Nothing is ever discarded:
a reverted candidate keeps its ref `refs/candidates/NNNN`.
"""
from __future__ import annotations

import difflib
import os
import subprocess
import threading
from pathlib import Path

CANDIDATE_FILE = "kernel.py"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "warpsmith",
    "GIT_AUTHOR_EMAIL": "warpsmith@localhost",
    "GIT_COMMITTER_NAME": "warpsmith",
    "GIT_COMMITTER_EMAIL": "warpsmith@localhost",
    # A user's global hooks or signing config must not run inside the harness's own repository.
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


class WorkspaceError(Exception):
    pass


class Workspace:
    def __init__(self, root: Path):
        self.root = Path(root)
        # One git command at a time: the proposer threads commit candidates while the loop keeps and a
        # re-measure reads; git's plumbing is atomic per command, but two writers of one ref (or of
        # the index a later porcelain call might take) fail on its lock file instead of waiting.
        self._lock = threading.RLock()

    # -- git plumbing -------------------------------------------------------------------------
    def git(self, *args: str, input: str | None = None) -> str:
        env = {**os.environ, **_GIT_ENV}
        with self._lock:
            r = subprocess.run(["git", "-C", str(self.root), *args], input=input, capture_output=True,
                               text=True, env=env)
        if r.returncode != 0:
            raise WorkspaceError(f"git {' '.join(args)} failed in {self.root}: {r.stderr.strip()}")
        return r.stdout.strip()

    @classmethod
    def create(cls, root: Path, baseline_source: str) -> "Workspace":
        root.mkdir(parents=True, exist_ok=True)
        ws = cls(root)
        ws.git("init", "-q", "-b", "best")
        commit = ws._commit(baseline_source, "baseline", parent=None)
        ws.git("update-ref", "refs/heads/best", commit)
        ws.git("update-ref", "refs/candidates/0000", commit)
        ws.sync_worktree()
        return ws

    def _commit(self, source: str, message: str, parent: str | None) -> str:
        blob = self.git("hash-object", "-w", "--stdin", input=source)
        tree = self.git("mktree", input=f"100644 blob {blob}\t{CANDIDATE_FILE}\n")
        args = ["commit-tree", tree, "-m", message]
        if parent:
            args += ["-p", parent]
        return self.git(*args)

    # -- what the loop uses ---------------------------------------------------------------------
    @property
    def best(self) -> str:
        return self.git("rev-parse", "refs/heads/best")

    @property
    def baseline(self) -> str:
        """The commit the session started from (the task's kernel.py): refs/candidates/0000."""
        return self.git("rev-parse", "refs/candidates/0000")

    def ever_kept(self) -> bool:
        """Whether any candidate was ever kept: best moved, a refs/kept/NNNN exists, or a per-bucket
        keep put one on refs/buckets/<bucket>."""
        return self.best != self.baseline or bool(self.refs("refs/kept/")) or bool(self.refs("refs/buckets/"))

    def source(self, commit: str) -> str:
        with self._lock:
            out = subprocess.run(["git", "-C", str(self.root), "show", f"{commit}:{CANDIDATE_FILE}"],
                                 capture_output=True, text=True, env={**os.environ, **_GIT_ENV})
        if out.returncode != 0:
            raise WorkspaceError(f"no {CANDIDATE_FILE} at {commit}: {out.stderr.strip()}")
        return out.stdout

    def commit_candidate(self, source: str, iteration: int, description: str) -> str:
        """Commit a candidate on top of the current best, under refs/candidates/NNNN."""
        first_line = description.strip().splitlines()[0] if description.strip() else "candidate"
        commit = self._commit(source, f"[{iteration:04d}] {first_line}\n\n{description}", parent=self.best)
        self.git("update-ref", f"refs/candidates/{iteration:04d}", commit)
        return commit

    def candidate_ref(self, iteration: int) -> str | None:
        try:
            return self.git("rev-parse", "--verify", "-q", f"refs/candidates/{iteration:04d}")
        except WorkspaceError:
            return None

    def keep(self, commit: str, iteration: int) -> None:
        """Advance best to `commit` (compare-and-swap on the old value) and mark it kept."""
        with self._lock:  # (no candidate committed on top of the old best between the read and the swap)
            self._keep(commit, iteration)

    def _keep(self, commit: str, iteration: int) -> None:
        old = self.best
        if old != commit:
            self.git("update-ref", "refs/heads/best", commit, old)
        self.git("update-ref", f"refs/kept/{iteration:04d}", commit)
        self.sync_worktree()

    def sync_worktree(self) -> None:
        """Leave kernel.py in the repository folder equal to best, for people who look there."""
        (self.root / CANDIDATE_FILE).write_text(self.source("refs/heads/best"))

    def refs(self, prefix: str) -> dict[str, str]:
        out = self.git("for-each-ref", "--format=%(refname) %(objectname)", prefix)
        return dict(line.split(" ", 1) for line in out.splitlines() if line)

    def write_candidate_file(self, commit: str, dest: Path) -> Path:
        dest.write_text(self.source(commit))
        return dest


def unified_diff(old: str, new: str, old_name: str = "best/kernel.py", new_name: str = "candidate/kernel.py") -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        fromfile=old_name, tofile=new_name))

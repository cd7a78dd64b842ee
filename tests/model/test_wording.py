"""One word for one thing: a *per-bucket keep* is the decision, the *routing table* says which kernel
runs in each bucket, and a *dispatcher* is only the module `sessions export` writes when a session
has per-bucket keeps. Export, the report, e2e and the docs say the same."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from warpsmith.cli import main
from harness.model.dispatch import keep_for_buckets
from harness.model.e2e import session_kernel
from harness.sessions.report import write_report
from harness.sessions.session import Session
from harness.authoring.tasks import load_task

from model_helpers import ONEPASS, REPO, bucketed_softmax, partial_win


@pytest.fixture
def bucketed(tmp_path, monkeypatch):
    """A session of a task with buckets whose only keep is a plain one (no per-bucket keep)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kernels").mkdir()
    bucketed_softmax(tmp_path / "kernels").rename(tmp_path / "kernels" / "softmax")
    task = load_task("softmax")
    s = Session.create("softmax", "script", task.baseline_path.read_text())
    c = s.workspace.commit_candidate(task.baseline_path.read_text().replace("BLOCK = 1024", "BLOCK = 2048"), 1, "b")
    s.workspace.keep(c, 1)
    return s, task


def lone_dispatch(text: str) -> list[str]:
    """Uses of 'dispatch' that are not 'dispatcher', outside code (`...`, <code>, file names)."""
    text = re.sub(r"`[^`]*`|<code>.*?</code>|\S*dispatch\S*\.py", "", text)
    return re.findall(r"\bdispatch(?!er)\w*", text, flags=re.I)


def test_without_per_bucket_keeps_nothing_is_called_a_dispatcher(bucketed, tmp_path, capsys):
    s, task = bucketed
    assert main(["sessions", "export", s.id, "-o", "k.py"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == (f"wrote the best kernel ({s.workspace.best[:10]}) to k.py: this session has no "
                           "per-bucket keeps, so there is no dispatcher to write")
    report = write_report(s, tmp_path / "r.md", fmt="md", task=task).read_text()
    assert "## Routing per bucket\n\nNo per-bucket keeps: `warpsmith sessions export` writes the best kernel" in report
    assert "| bucket | range | runs |" not in report  # no routing table that nothing would route by
    _, _, what = session_kernel(s, tmp_path)
    assert what == f"best {s.workspace.best[:10]} (no per-bucket keeps)"
    assert lone_dispatch(out + report + what) == []


def test_with_a_per_bucket_keep_export_report_and_e2e_name_the_dispatcher(bucketed, tmp_path, capsys):
    s, task = bucketed
    c = s.workspace.commit_candidate(ONEPASS.read_text(), 2, "one pass")
    keep_for_buckets(s, 2, c, ["short rows"], task, partial_win())
    assert main(["sessions", "export", s.id, "-o", "d.py"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote a dispatcher for softmax to d.py, routing each call by bucket:")
    report = write_report(s, tmp_path / "r.md", fmt="md", task=task).read_text()
    assert "## Per-bucket keeps" in report
    assert "The dispatcher `warpsmith sessions export` writes runs, in each bucket, the kernel named here" in report
    assert "| short rows | cols in [1, 1025) | iter 2" in report
    _, _, what = session_kernel(s, tmp_path)
    assert what == "dispatcher (per-bucket keeps)"
    html = write_report(s, tmp_path / "r.html", task=task).read_text()
    assert lone_dispatch(out + report + html + what) == []


def test_the_docs_use_the_same_words():
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        assert lone_dispatch(doc.read_text()) == [], doc

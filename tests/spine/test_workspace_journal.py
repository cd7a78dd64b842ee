"""Workspace keeps every candidate on its own ref; the journal survives torn writes."""

from harness.sessions.journal import Journal, results_rows, write_results_tsv
from harness.sessions.workspace import Workspace, unified_diff


def test_candidates_get_refs_and_best_moves_only_on_keep(tmp_path):
    ws = Workspace.create(tmp_path / "repo", "BLOCK = 1\n")
    base = ws.best
    c1 = ws.commit_candidate("BLOCK = 2\n", 1, "try 2")
    assert ws.best == base  # proposing never moves best
    ws.keep(c1, 1)
    assert ws.best == c1 and (tmp_path / "repo" / "kernel.py").read_text() == "BLOCK = 2\n"
    c2 = ws.commit_candidate("BLOCK = 4\n", 2, "try 4")
    refs = ws.refs("refs/")
    assert refs["refs/candidates/0002"] == c2 and refs["refs/kept/0001"] == c1
    assert ws.best == c1  # a reverted candidate stays reachable, best does not move
    assert ws.git("rev-parse", f"{c2}^") == c1  # candidates are diffed and based on the best at the time
    assert ws.source(c2) == "BLOCK = 4\n"


def test_unified_diff_names_both_sides():
    d = unified_diff("a\nb\n", "a\nc\n")
    assert "--- best/kernel.py" in d and "-b" in d and "+c" in d


def test_torn_last_line_is_skipped_and_reported(tmp_path):
    j = Journal(tmp_path / "journal.jsonl")
    j.append({"kind": "IterationStarted", "iteration": 1})
    with open(j.path, "a") as f:
        f.write('{"kind": "Decision", "iter')  # a kill in the middle of a write
    records = j.read()
    assert [r["kind"] for r in records] == ["IterationStarted"]
    assert j.torn_lines == [3]  # (line 1 is the journal's schema version)


def test_results_tsv_is_a_view_of_decisions(tmp_path):
    records = [
        {"kind": "CandidateProposed", "iteration": 1, "commit": "abc123", "description": "BLOCK 1 -> 2"},
        {"kind": "EvalResult", "iteration": 1, "verdict": {"accepted": True, "geomean_speedup": 1.25}},
        {"kind": "Decision", "iteration": 1, "action": "keep", "override": False, "commit": "abc123"},
        {"kind": "CandidateProposed", "iteration": 2, "commit": "def456", "description": "bad"},
        {"kind": "EvalResult", "iteration": 2, "verdict": {"accepted": False, "stage": "static"}},
        {"kind": "Decision", "iteration": 2, "action": "revert", "commit": "def456"},
    ]
    write_results_tsv(tmp_path / "results.tsv", records)
    lines = (tmp_path / "results.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["iteration", "commit", "verdict", "geomean_speedup", "decision", "description",
                                    "outcome"]
    assert lines[1].split("\t") == ["1", "abc123", "accepted", "1.2500", "keep", "BLOCK 1 -> 2", "kept"]
    assert lines[2].split("\t")[2:5] == ["rejected:static", "n/a", "revert"]
    assert lines[2].split("\t")[-1] == "rejected"
    assert len(results_rows(records)) == 2


def test_a_new_journal_says_its_schema_and_an_old_one_reads_as_version_0(tmp_path):
    from pathlib import Path

    from harness.sessions.journal import SCHEMA_VERSION

    j = Journal(tmp_path / "journal.jsonl")
    j.append({"kind": "IterationStarted", "iteration": 1})
    j.append({"kind": "IterationStarted", "iteration": 2})
    first = j.path.read_text().splitlines()[0]
    assert first == '{"kind":"JournalSchema","version":%d}' % SCHEMA_VERSION
    assert [r["iteration"] for r in j.read()] == [1, 2] and j.schema == SCHEMA_VERSION
    old = Journal(Path(__file__).resolve().parents[1] / "fixtures" / "journal_v0" / "cpu_run.jsonl")
    assert old.read()[0]["kind"] == "PacksSelected" and old.schema == 0


def test_candidates_committed_and_kept_from_many_threads_all_land(tmp_path):
    """Proposer threads commit while the loop keeps: every keep's compare-and-swap of best sees the
    best it read (no 'cannot lock ref' from a neighbour's swap in between), every candidate's ref exists."""
    import threading

    ws = Workspace.create(tmp_path / "repo", "BLOCK = 1\n")
    errors = []

    def worker(i: int) -> None:
        try:
            c = ws.commit_candidate(f"BLOCK = {i + 2}\n", i + 1, f"try {i}")
            ws.keep(c, i + 1)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(ws.refs("refs/candidates/")) == 13 and len(ws.refs("refs/kept/")) == 12
    assert ws.source("refs/heads/best") in {f"BLOCK = {i + 2}\n" for i in range(12)}


def test_what_a_person_changes_is_journalled_by_the_session(tmp_path):
    """The TUI's screens act through these (ideas, decision mode, an idea from the step profile):
    none of them writes the journal itself."""
    from harness.sessions.history import SessionHistory
    from harness.sessions.session import Session
    from harness.model.step_profile import StepProfile, StepRow

    s = Session.create("softmax", "tuner", "BLOCK = 1\n", base=tmp_path)
    s.set_ideas(["try a persistent kernel"])
    s.set_decision_mode("auto")
    row = StepRow("softmax (task kernel)", "task", calls=1, share=0.5, bound="memory")
    s.idea_from_profile("fuse the scale", row, StepProfile("softmax", "decode step", "cpu", False, None, [row],
                                                           candidate="c0ffee"))
    assert Session.open(s.id, tmp_path).meta.ideas == ["try a persistent kernel"]
    kinds = [r["kind"] for r in s.journal.read()]
    assert kinds[-3:] == ["IdeasChanged", "DecisionMode", "IdeaFromProfile"]
    idea = SessionHistory.of(s).events()[-1]
    assert (idea.idea, idea.row["name"], idea.row["share"], idea.workload, idea.measured, idea.candidate) == \
        ("fuse the scale", "softmax (task kernel)", 0.5, "decode step", False, "c0ffee")

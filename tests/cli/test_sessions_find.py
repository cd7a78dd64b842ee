"""Sessions a person can find: `latest`, a unique prefix or part of an id (its tag), empty listings
that say where they looked, and `sessions show` as a table a person reads."""
from __future__ import annotations

import os

import pytest

from harness import events as ev
from warpsmith.cli import main
from harness.authoring.tasks import load_task
from harness.wiring import RunConfig, start_session
from harness.evaluate.records import Verdict


@pytest.fixture
def task():
    return load_task("softmax", check_null=False)


@pytest.fixture(autouse=True)
def here(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "200")  # rich's width when stdout is not a terminal


def chosen(command: list[str], tmp_path, out: str) -> str:
    """What the command wrote, in which the chosen session shows."""
    if command[0] == "report":
        return (tmp_path / "r.md").read_text()
    if command[1] == "export":
        return (tmp_path / "out.py").read_text()  # each session kept its own kernel
    return out


@pytest.mark.parametrize("command", [["sessions", "show"], ["sessions", "export", "-o", "out.py"],
                                     ["report", "-o", "r.md"]])
def test_latest_and_the_tag_name_one_session(command, task, tmp_path, capsys):
    sessions = [start_session(task, RunConfig(), base=tmp_path) for _ in range(2)]
    for s in sessions:
        c = s.workspace.commit_candidate(f"# kept in {s.id}\n", 1, "kept")
        s.workspace.keep(c, 1)
    older, newer = sessions
    assert main([*command, "latest"]) == 0
    assert newer.id in chosen(command, tmp_path, capsys.readouterr().out)
    tag = older.id.rsplit("-", 1)[1]  # DATE-TIME-TASK-TAG: the tag is the part people remember
    if tag in newer.id:
        pytest.skip("both random tags alike")
    assert main([*command, tag]) == 0
    assert older.id in chosen(command, tmp_path, capsys.readouterr().out)
    assert main([*command, os.path.commonprefix([older.id, newer.id])]) == 2  # both start so: ambiguous
    assert "is ambiguous" in capsys.readouterr().err


def test_latest_is_the_newest_even_within_one_second(task, tmp_path, capsys):
    a = start_session(task, RunConfig(), base=tmp_path)
    b = start_session(task, RunConfig(), base=tmp_path)
    newest = max((a, b), key=lambda s: s.meta.created)
    assert main(["sessions", "show", "latest"]) == 0
    assert f"session {newest.id}:" in capsys.readouterr().out


def test_a_part_of_several_ids_lists_them(task, tmp_path, capsys):
    a = start_session(task, RunConfig(), base=tmp_path)
    b = start_session(task, RunConfig(), base=tmp_path)
    assert main(["sessions", "show", "softmax"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'softmax' is ambiguous" in err and a.id in err and b.id in err


def test_empty_listings_say_where_they_looked_and_how_to_start(tmp_path, capsys):
    folder = tmp_path / ".warpsmith" / "sessions"
    assert main(["sessions", "list"]) == 0
    out = capsys.readouterr().out
    assert f"no sessions under {folder}" in out and "warpsmith run TASK" in out
    assert main(["sessions", "show", "latest"]) == 2
    err = capsys.readouterr().err
    assert f"no sessions under {folder}" in err and "warpsmith run TASK" in err


def test_an_unknown_id_names_the_folder_and_the_newest(task, tmp_path, capsys):
    s = start_session(task, RunConfig(), base=tmp_path)
    assert main(["sessions", "show", "zzz-nope"]) == 2
    err = capsys.readouterr().err
    assert f"no session 'zzz-nope' under {tmp_path / '.warpsmith' / 'sessions'}" in err and s.id in err


def record(s, *events) -> None:
    for e in events:
        s.record(e.to_dict())


def verdict(accepted: bool, speedup: float | None, stage: str = "done", rule: str = "") -> dict:
    return {"accepted": accepted, "stage": stage, "geomean_speedup": speedup,
            "reasons": [{"rule": rule, "message": "..."}] if rule else []}


def test_show_is_a_table_of_every_candidate_with_who_decided_and_why(task, tmp_path, capsys):
    s = start_session(task, RunConfig(), base=tmp_path)
    c = [s.workspace.commit_candidate(f"BLOCK = {i}\n", i, f"try {i}") for i in range(1, 6)]
    record(s,
           ev.CandidateProposed(1, c[0], "BLOCK 1024 -> 512", "", ""),
           ev.EvalResult(1, Verdict.from_json(verdict(True, 1.0351))),
           ev.Decision(1, "keep", "auto", False, "", c[0], c[0]),
           ev.CandidateProposed(2, c[1], "[bold]BLOCK 512 -> 256[/bold]", "", ""),  # text, never markup
           ev.EvalResult(2, Verdict.from_json(verdict(True, 1.2))),
           ev.Decision(2, "revert", "human", False, "too much register pressure", c[1], c[0]),
           ev.CandidateProposed(3, c[2], "torch fallback", "", ""),
           ev.EvalResult(3, Verdict.from_json(verdict(False, None, "static", "no-torch-fallback"))),
           ev.Decision(3, "revert", "policy", False, "(cannot keep: static)", c[2], c[0]),
           ev.CandidateProposed(4, c[3], "one pass for short rows", "", ""),
           ev.EvalResult(4, Verdict.from_json(verdict(True, 0.97))),
           ev.Decision(4, "revert", "human", False, "kept for the short bucket(s) only", c[3], c[0]),
           ev.BucketKeep(4, c[3], ["short"], "human"),
           ev.CandidateProposed(5, c[4], "num_warps 4 -> 8", "", ""),
           ev.EvalResult(5, Verdict.from_json(verdict(True, None))))
    assert main(["sessions", "show", s.id[:12]]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["iter", "commit"])
    header, body = lines[head], [line for line in lines[head + 2:head + 7]]
    col = {name: header.index(name) for name in ("commit", "verdict", "geomean", "decision", "by", "veto reason")}
    row = dict(zip("12345", body))
    # Aligned: each row's cells start under their heading.
    assert row["1"][col["verdict"]:].startswith("accepted") and row["1"][col["by"]:].startswith("auto")
    assert row["1"][col["geomean"]:].strip().startswith("1.035x")
    assert row["1"][col["commit"]:].startswith(c[0][:10])
    assert "[bold]BLOCK 512 -> 256[/bold]" in row["2"]
    assert row["2"][col["decision"]:].startswith("revert") and row["2"][col["by"]:].startswith("person")
    assert row["2"][col["veto reason"]:].startswith("too much register pressure")
    assert row["3"][col["verdict"]:].startswith("rejected (static: no-torch-fallback)")
    assert row["3"][col["by"]:].startswith("harness")
    assert row["4"][col["decision"]:].startswith("kept for short")
    assert row["5"][col["decision"]:].startswith("undecided (asked again on resume)")
    assert row["5"][col["geomean"]:].strip().startswith("n/a")
    assert any("left undecided when it stopped: #5" in line and f"sessions resume {s.id}" in line for line in lines)


def test_show_of_a_session_without_candidates_says_how_to_continue(task, tmp_path, capsys):
    s = start_session(task, RunConfig(), base=tmp_path)
    assert main(["sessions", "show", "latest"]) == 0
    assert f"no candidates yet; continue it with `warpsmith sessions resume {s.id}`" in capsys.readouterr().out


def test_show_piped_at_80_columns_breaks_no_word(task, tmp_path, capsys, monkeypatch):
    """Redirected to a file, Rich would fit the table to 80 columns: words folded mid-way
    (`too many / rows per / program f`) and the last column cropped. Piped, each row is one line."""
    monkeypatch.setenv("COLUMNS", "80")
    s = start_session(task, RunConfig(), base=tmp_path)
    c = s.workspace.commit_candidate("BLOCK = 1\n", 1, "try")
    reason = "too many rows per program for the long shape; try splitting the row across programs"
    record(s, ev.CandidateProposed(1, c, "tuner: variants/rows.py BLOCK=1024 num_warps=8 num_stages=2", "", ""),
           ev.EvalResult(1, Verdict.from_json(verdict(False, None, "correctness", "wrong-answer"))),
           ev.Decision(1, "revert", "human", False, reason, c, c))
    assert main(["sessions", "show", s.id]) == 0
    lines = capsys.readouterr().out.splitlines()
    row = next(line for line in lines if line.lstrip().startswith("1 "))
    assert "tuner: variants/rows.py BLOCK=1024 num_warps=8 num_stages=2" in row
    assert "rejected (correctness: wrong-answer)" in row and row.rstrip().endswith(reason)
    assert next(line for line in lines if line.lstrip().startswith("iter")).rstrip().endswith("veto reason")

"""Every bad input of every command: one line on stderr naming the thing that is wrong, exit status 2,
no traceback, and a session it names is left exactly as it was (journal, metadata, git refs)."""
from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from warpsmith.cli import main
from harness.sessions.session import Session

ROOT = Path(__file__).resolve().parents[2]
SID = "SESSION"  # replaced by the fixture session's id

CASES = [
    # (command line, what the line must say)
    ("run nosuch --headless --auto", "nosuch: no such task"),
    ("run badtask --headless --auto", "badtask/task.toml: bad TOML"),
    ("run softmax --headless --auto --iterations abc", "--iterations: invalid int value: 'abc'"),
    ("run softmax --headless --auto --iterations 0", "--iterations 0: must be at least 1"),
    ("run softmax --headless --auto --proposals 0", "--proposals 0: must be at least 1"),
    ("run softmax --headless --auto --budget-usd -1", "--budget-usd -1: must be more than 0"),
    ("run softmax --headless --auto --timeout 0", "--timeout 0: must be a number of seconds above 0"),
    ("run softmax --headless --auto --agent bogus", "--agent 'bogus': unknown agent"),
    ("run softmax --headless --auto --agent script:nofolder", "nofolder: no such folder"),
    ("run softmax --headless --auto --eval nope", "--eval 'nope'"),
    ("run softmax --headless --auto --packs nosuchpack", "--packs: no pack 'nosuchpack'"),
    ("run softmax --headless --auto --keep-buckets maybe", "--keep-buckets: invalid choice: 'maybe'"),
    ("eval nosuch cand.py", "nosuch: no such task"),
    ("eval badtask cand.py", "badtask/task.toml: bad TOML"),
    ("eval softmax missing.py", "missing.py: no such file"),
    ("eval softmax folder", "folder: is a directory"),
    ("eval softmax cand.py --incumbent missing.py", "missing.py: no such file"),
    ("eval softmax cand.py --samples 0", "--samples 0: must be at least 1"),
    ("eval softmax cand.py --timeout abc", "--timeout: invalid float value: 'abc'"),
    ("eval softmax cand.py --timeout -5", "--timeout -5: must be a number of seconds above 0"),
    ("eval softmax cand.py --cpu --shapes nope", "no shape named 'nope'"),
    ("check nosuch cand.py", "nosuch: no such task"),
    ("check badtask cand.py", "badtask/task.toml: bad TOML"),
    ("check softmax missing.py", "missing.py: no such file"),
    ("check softmax cand.py --rules +nosuch", "no rules pack 'nosuch'"),
    ("tasks show nosuch", "nosuch: no such task"),
    ("tasks show badtask", "badtask/task.toml: bad TOML"),
    ("tasks show folder", "folder: not a task folder"),
    ("sessions show nosuch", "no session 'nosuch'"),
    ("sessions resume nosuch", "no session 'nosuch'"),
    ("sessions export nosuch -o x.py", "no session 'nosuch'"),
    ("report nosuch", "no session 'nosuch'"),
    ("e2e nosuch", "no session 'nosuch'"),
    (f"sessions resume {SID} --iterations 0 --headless", "--iterations 0: must be at least 1"),
    (f"sessions resume {SID} --iterations abc", "--iterations: invalid int value: 'abc'"),
    (f"sessions resume {SID} --packs nosuchpack --headless --auto", "--packs: no pack 'nosuchpack'"),
    (f"sessions export {SID} -o nofolder/x.py", "nofolder/x.py: no such folder"),
    (f"sessions export {SID} -o folder", "folder: is a folder"),
    (f"report {SID} --format pdf", "--format: invalid choice: 'pdf'"),
    ("profile nosuch", "nosuch: no such task"),
    ("profile softmax missing.py", "missing.py: no such candidate file"),
    ("agents --bogus", "unrecognized arguments: --bogus"),
    ("nosuchcommand", "invalid choice: 'nosuchcommand'"),
]


def _fingerprint(s: Session) -> tuple:
    files = sorted(p for p in s.root.iterdir() if p.is_file())
    refs = subprocess.run(["git", "-C", str(s.root / "repo"), "show-ref"], capture_output=True, text=True).stdout
    return tuple((p.name, hashlib.sha256(p.read_bytes()).hexdigest()) for p in files) + (refs,)


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("WARPSMITH_CONFIG_DIR", str(tmp_path / "config"))
    (tmp_path / "cand.py").write_text((ROOT / "kernels" / "softmax" / "kernel.py").read_text())
    (tmp_path / "folder").mkdir()
    (tmp_path / "badtask").mkdir()
    (tmp_path / "badtask" / "task.toml").write_text('name = "x"\ndsl = [\n')
    s = Session.create("softmax", "tuner", (ROOT / "kernels" / "softmax" / "kernel.py").read_text(), base=tmp_path)
    s.record({"kind": "IterationStarted", "iteration": 1})
    return tmp_path, s


@pytest.mark.parametrize("line,says", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2(workdir, capsys, line, says):
    tmp_path, s = workdir
    before = _fingerprint(s)
    sessions_before = sorted((tmp_path / ".warpsmith" / "sessions").iterdir())
    try:
        rc = main(line.replace(SID, s.id).split())
    except SystemExit as e:  # argparse's own refusals
        rc = e.code
    err = capsys.readouterr().err.strip()
    assert rc == 2, err
    assert says in err, err
    assert "\n" not in err and "Traceback" not in err, err
    assert _fingerprint(s) == before  # nothing in the session changed
    assert sorted((tmp_path / ".warpsmith" / "sessions").iterdir()) == sessions_before  # and none was made

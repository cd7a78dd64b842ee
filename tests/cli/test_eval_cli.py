"""`warpsmith eval` as a person uses it: fast bad-input errors, readable rejections, a bounded hang."""
from __future__ import annotations

import io
import subprocess
import sys
import time
from pathlib import Path

from harness.evaluate.records import Verdict
from warpsmith.cli import main
from warpsmith.commands.eval import print_table

ROOT = Path(__file__).resolve().parents[2]
BASELINE = (ROOT / "kernels" / "softmax" / "kernel.py").read_text()


def _verdict(**kw) -> dict:
    v = {"accepted": False, "stage": "static", "task": "softmax", "device": "cpu (Triton interpreter)",
         "wall_s": 0.1, "shapes": [], "geomean_speedup": None, "noise_band_pct": None, "timing_available": False,
         "reasons": [], "notes": [], "candidate": "/tmp/x/cand.py",
         "recommendation": {"action": "revert", "reason": "rejected: something"}}
    v.update(kw)
    return v


def _shape(name: str, error: str | None = None) -> dict:
    return {"name": name, "correct": error is None, "error": error, "candidate_us": None, "incumbent_us": None,
            "speedup": None, "noise_pct": None, "roofline_pct": None, "candidate_graph_us": None}


def _text(v: dict) -> str:
    buf = io.StringIO()
    print_table(Verdict.from_json(v), buf)
    return buf.getvalue()


def test_missing_candidate_is_bad_input_and_answered_before_importing_torch(tmp_path):
    # in a child: this test process may have imported torch already; a wall-clock bound flakes on busy CI
    probe = ("import sys\nfrom warpsmith.cli import main\n"
             f"rc = main(['eval', 'softmax', {str(tmp_path / 'nope.py')!r}])\n"
             "print(rc, 'torch' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                       cwd=Path(__file__).resolve().parents[2])
    assert r.stdout.split() == ["2", "False"], r.stdout + r.stderr
    assert "nope.py: no such file" in r.stderr


def test_static_rejection_has_no_empty_table_and_names_file_line():
    out = _text(_verdict(reasons=[{"rule": "static:python-syntax",
                                   "message": "The candidate is not valid Python: fix the syntax error here. (line 38)"}]))
    assert "cand µs" not in out  # no shape ran: no header without rows
    assert "cand.py:38: The candidate is not valid Python" in out
    assert out.count("not valid Python") == 1  # not repeated by the recommendation line


def test_same_crash_on_every_shape_is_said_once_with_the_candidates_line():
    tb = ('the candidate raised: RuntimeError: boom\nTraceback (most recent call last):\n'
          '  File "/work/main/harness/evaluate/child.py", line 116, in op_call\n    out = fn(*xs)\n'
          '  File "/tmp/x/cand.py", line 43, in softmax\n    raise RuntimeError(\'boom\')\nRuntimeError: boom\n')
    reasons = [{"rule": "crashed", "message": f"[{n}] {tb}"} for n in ("a", "b")]
    out = _text(_verdict(stage="correctness", reasons=reasons,
                         shapes=[_shape("a", "raised"), _shape("b", "raised")]))
    assert "✗ crashed: [a, b] the candidate raised: RuntimeError: boom" in out
    assert "cand.py:43: raise RuntimeError('boom')" in out
    assert out.count("✗ crashed") == 1


def test_timeout_names_the_shape_and_what_to_do():
    out = _text(_verdict(stage="correctness",
                         reasons=[{"rule": "timeout", "message": "no answer within 600 s (op call); the child was killed"}],
                         shapes=[_shape("a"), _shape("b", "timeout: no answer"),
                                 _shape("c", "not run: the child process failed earlier")]))
    assert "✗ timeout: [b] no answer within 600 s" in out
    assert "--timeout SECONDS" in out


def test_broken_rules_pack_is_bad_input_naming_the_pack(tmp_path, monkeypatch, capsys):
    cand = tmp_path / "cand.py"
    cand.write_text(BASELINE)
    pack = tmp_path / ".warpsmith" / "packs" / "reward-hacks"
    pack.mkdir(parents=True)
    (pack / "pack.toml").write_text('id = "reward-hacks"\nkind = "rules"\ntitle = "x"\nversion = "1.0.0"\n'
                                    '[[rule]]\nid = "a"\nmessage = "m"\nquery = "(bad"\n')
    monkeypatch.chdir(tmp_path)
    rc = main(["eval", "softmax", str(cand)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert "reward-hacks/pack.toml" in err and "packs validate" in err
    assert "tree-sitter, tree-sitter-python" not in err  # not the misleading 'install dependencies' hint


def test_bad_timeout_value_is_bad_input(tmp_path, capsys):
    cand = tmp_path / "cand.py"
    cand.write_text(BASELINE)
    assert main(["eval", "softmax", str(cand), "--timeout", "0"]) == 2
    assert "--timeout" in capsys.readouterr().err


def test_a_hang_is_reported_within_the_timeout(tmp_path, capsys):
    cand = tmp_path / "hang.py"
    cand.write_text(BASELINE.replace("def softmax(x):\n", "def softmax(x):\n    while True:\n        pass\n"))
    t0 = time.perf_counter()
    rc = main(["eval", "softmax", str(cand), "--cpu", "--shapes", "short rows", "--timeout", "3"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "✗ timeout: [short rows]" in out and "--timeout SECONDS" in out
    assert time.perf_counter() - t0 < 60


def test_a_file_that_is_not_utf8_is_bad_input_named_in_one_line(tmp_path, capsys):
    bad = tmp_path / "bin.py"
    bad.write_bytes(b"\xff\xfe bad")
    for extra in ([], ["--json"]):  # --json too: bad input is never a verdict
        assert main(["eval", "softmax", str(bad), *extra]) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err == f"warpsmith eval: {bad}: cannot read candidate: not UTF-8 text (byte 0xff at " \
                               "offset 0); save it as UTF-8\n"


def test_a_directory_is_said_to_be_a_directory_not_missing(tmp_path, capsys):
    assert main(["eval", "softmax", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path}: is a directory, not a file" in err and "no such file" not in err
    cand = tmp_path / "cand.py"
    cand.write_text(BASELINE)
    assert main(["eval", "softmax", str(cand), "--incumbent", str(tmp_path)]) == 2
    assert f"{tmp_path}: is a directory, not a file (give the incumbent's .py path)" in capsys.readouterr().err


def test_static_violations_are_shown_as_check_shows_them(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cand = tmp_path / "dunder.py"
    cand.write_text(BASELINE.replace("    y = torch.empty_like(x)\n",
                                     "    y = torch.empty_like(x)\n    n = x.__len__()\n"))
    assert main(["check", "softmax", "dunder.py"]) == 1
    check_lines = capsys.readouterr().out.splitlines()
    assert check_lines[0].startswith("dunder.py:") and ": no-dunder: " in check_lines[0]
    assert check_lines[1] == "    n = x.__len__()"  # the offending source line, under it
    assert main(["eval", "softmax", "dunder.py"]) == 1
    out = capsys.readouterr().out
    assert f"  ✗ {check_lines[0]}\n  {check_lines[1]}\n" in out
    assert out.count("no-dunder") == 1  # not repeated as a reason without its place


def test_a_syntax_error_is_located_as_file_line_col_with_its_source_line():
    v = _verdict(reasons=[{"rule": "static:python-syntax",
                           "message": "The candidate is not valid Python: invalid syntax at line 38: '(' was never closed."}],
                 violations=[{"rule": "python-syntax", "line": 38, "col": 12, "snippet": "def softmax(x:",
                              "severity": "error",
                              "message": "The candidate is not valid Python: invalid syntax at line 38: '(' was never closed."}])
    out = _text(v)
    assert "  ✗ /tmp/x/cand.py:38:12: python-syntax: The candidate is not valid Python" in out
    assert "      def softmax(x:\n" in out
    assert out.count("not valid Python") == 1


def test_the_time_columns_say_cand_and_best_as_headless_does():
    shape = {**_shape("a"), "candidate_us": 1.0, "incumbent_us": 2.0, "speedup": 2.0}
    header = _text(_verdict(stage="done", shapes=[shape])).splitlines()[1]
    assert "cand µs" in header and "best µs" in header and "inc µs" not in header


def test_a_fault_inside_the_harness_is_still_a_json_verdict_rejected_with_the_traceback(tmp_path, monkeypatch,
                                                                                        capsys):
    import json

    import harness.evaluate.runner as runner

    def broken(*a, **kw):
        raise KeyError("n_out")  # what a reader did on a malformed reply before replies were checked

    monkeypatch.setenv("WARPSMITH_PREWARM", "0")
    monkeypatch.setattr(runner, "evaluate", broken)  # `eval` imports it from there when it runs
    cand = tmp_path / "cand.py"
    cand.write_text(BASELINE)
    rc = main(["eval", "softmax", str(cand), "--json", "--cpu"])
    v = json.loads(capsys.readouterr().out)
    assert rc == 1 and v["accepted"] is False and v["recommendation"]["can_keep"] is False
    assert [r["rule"] for r in v["reasons"]] == ["harness-error"] and "KeyError: 'n_out'" in v["reasons"][0]["message"]
    assert "Traceback" in v["output"] and "in broken" in v["output"]


def test_a_correctly_signed_malformed_reply_is_a_json_verdict_not_a_traceback(monkeypatch, capsys):
    import json

    monkeypatch.setenv("WARPSMITH_PREWARM", "0")
    cand = ROOT / "tests" / "redteam" / "candidates" / "forged_reply.py"
    rc = main(["eval", "softmax", str(cand), "--json", "--cpu", "--no-static", "--shapes", "odd rows"])
    v = json.loads(capsys.readouterr().out)
    assert rc == 1 and "malformed-reply" in {r["rule"] for r in v["reasons"]}


def test_shapes_the_evaluation_stopped_before_say_not_run_not_NO():
    """Correctness checks the smallest shape first and stops at the first wrong one: the others never
    ran (the JSON says "not run: ..."), and every table says so instead of NO."""
    from harness.headless import shape_table
    from tui.widgets.bench import shape_rows

    later = "not run: the candidate was already wrong on 'small' (shapes are checked smallest first)"
    v = _verdict(stage="correctness", shapes=[_shape("small", "max abs error 3.1 > atol"),
                                              _shape("big", later), _shape("long rows", later)])
    rows = {line.split()[0]: line for line in _text(v).splitlines() if line.startswith("  ") and line.split()}
    assert rows["small"].split()[1] == "NO"
    assert "not run" in rows["big"] and "NO" not in rows["big"] and "not run" in rows["long"]
    table = shape_table(Verdict.from_json(v))
    assert table[2].split()[1:3] == ["not", "run"] and table[1].split()[1] == "NO"
    assert [r[1] for r in shape_rows(Verdict.from_json(v))] == ["wrong", "not run", "not run"]


def test_a_located_static_warning_is_said_once_with_its_line_and_other_notes_stay():
    from harness.evaluate.verdict import static_warning_note

    located = {"rule": "no-sleep", "message": "time.sleep in a kernel module", "line": 7, "col": 1,
               "severity": "warning", "snippet": "time.sleep(1)"}
    nowhere = {"rule": "odd-import", "message": "an import at run time", "severity": "warning"}
    v = _verdict(accepted=True, stage="done", violations=[located, nowhere],
                 notes=[static_warning_note(located), static_warning_note(nowhere), "sandbox: bwrap"])
    text = _text(v)
    assert "! /tmp/x/cand.py:7:" in text and "no-sleep" in text  # with the violations, file:line
    assert f"note: {static_warning_note(located)}" not in text  # not said a second time
    assert f"note: {static_warning_note(nowhere)}" in text  # no line to list it by: still a note
    assert "note: sandbox: bwrap" in text

"""`warpsmith check`: exit codes, text and JSON output, --rules selection, broken packs."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from warpsmith.cli import main

CORPUS = Path(__file__).parent / "corpus"
GOOD = CORPUS / "good" / "triton" / "baseline.py"
BAD = CORPUS / "bad" / "triton" / "helper_hides_torch.py"


def test_clean_candidate_exits_0(capsys):
    assert main(["check", "softmax", str(GOOD)]) == 0
    assert "ok: 0 violation(s)" in capsys.readouterr().err


def test_violations_exit_1_with_file_line_col_rule(capsys):
    assert main(["check", "softmax", str(BAD)]) == 1
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert first.startswith(f"{BAD}:") and ": torch-compute: " in first
    assert "torch.exp" in out  # the snippet / detail names the offending call


def test_check_reads_bytes_like_the_evaluator(capsys, tmp_path):
    """`warpsmith check` judges the same bytes as `warpsmith eval`: a coding cookie and a lone CR
    are in them (no read_text() decoding by the locale or newline translation in between)."""
    cookie = tmp_path / "cookie.py"
    cookie.write_bytes(b"# -*- coding: utf-7 -*-\n" + GOOD.read_bytes())
    assert main(["check", "softmax", str(cookie)]) == 1
    assert capsys.readouterr().out.startswith(f"{cookie}:1:15: source-encoding: line 1 declares the source encoding")
    lone_cr = tmp_path / "cr.py"
    lone_cr.write_bytes(GOOD.read_bytes().replace(b"import torch\n", b"import torch  # \rimport os\n", 1))
    assert main(["check", "softmax", str(lone_cr), "--json"]) == 1
    assert [r["rule"] for r in json.loads(capsys.readouterr().out)["reasons"]] == ["source-text"]


def test_json_verdict(capsys):
    assert main(["check", "softmax", str(BAD), "--json"]) == 1
    v = json.loads(capsys.readouterr().out)
    assert v["accepted"] is False and v["stage"] == "static"
    r = v["reasons"][0]
    assert {"rule", "message", "line", "col", "snippet"} <= set(r)
    assert any(x["rule"] == "torch-compute" for x in v["reasons"])


def test_rules_option_selects_and_removes(capsys, tmp_path):
    src = tmp_path / "c.py"
    src.write_text(GOOD.read_text() + "\n\ndef _unused():\n    try:\n        pass\n    except ValueError:\n        pass\n")
    assert main(["check", "softmax", str(src)]) == 1
    capsys.readouterr()
    assert main(["check", "softmax", str(src), "--rules=-no-try-fallback"]) == 0
    capsys.readouterr()
    assert main(["check", "softmax", str(src), "--rules", "cuda-graphs", "--json"]) == 0
    assert "no-try-fallback" not in json.loads(capsys.readouterr().out)["rules"]


@pytest.mark.parametrize("argv", [
    ["check", "no-such-task", "x.py"],
    ["check", "softmax", "/nonexistent/candidate.py"],
    ["check", "softmax", str(GOOD), "--rules=-not-a-rule"],
])
def test_bad_input_exits_2(argv, capsys):
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err


def test_broken_pack_exits_2_naming_file_and_rule(tmp_path, monkeypatch, capsys):
    d = tmp_path / "reward-hacks"
    d.mkdir()
    (d / "pack.toml").write_text('id = "reward-hacks"\nkind = "rules"\n[[rule]]\nid = "r"\nmessage = "m"\n'
                                 'runtime = "made-up"\n')
    monkeypatch.setenv("WARPSMITH_PACKS", str(tmp_path))
    assert main(["check", "softmax", str(GOOD)]) == 2
    err = capsys.readouterr().err
    assert f"{d / 'pack.toml'}: rule r: unknown runtime check 'made-up'" in err


def test_list_rules(capsys):
    assert main(["check", "softmax", "--list", "--json"]) == 0
    rules = json.loads(capsys.readouterr().out)
    kinds = {(r["pack"], r["id"]): r["kind"] for r in rules}
    assert kinds[("dsl-triton", "triton-launch")] == "check"
    assert kinds[("cuda-graphs", "cuda-graph-capturable")] == "runtime"
    assert kinds[("reward-hacks", "no-io")] == "query"
    assert main(["check", "softmax"]) == 2

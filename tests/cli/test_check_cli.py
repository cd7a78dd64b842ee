"""`warpsmith check`: the per-candidate time apart from the one-off rules load; broken packs say what to do."""
from __future__ import annotations

import json
from pathlib import Path

from warpsmith.cli import main

GOOD = Path(__file__).resolve().parents[2] / "kernels" / "softmax" / "kernel.py"


def test_json_reports_rules_load_apart_from_the_check(capsys):
    assert main(["check", "softmax", str(GOOD), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["accepted"] is True
    assert out["rules_load_ms"] > 0 and out["elapsed_ms"] > 0


def test_broken_rules_pack_says_how_to_check_it(tmp_path, monkeypatch, capsys):
    pack = tmp_path / ".warpsmith" / "packs" / "reward-hacks"
    pack.mkdir(parents=True)
    (pack / "pack.toml").write_text('id = "reward-hacks"\nkind = "rules"\ntitle = "x"\nversion = "1.0.0"\n'
                                    '[[rule]]\nid = "a"\nmessage = "m"\nquery = "(bad"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", "softmax", str(GOOD)]) == 2
    err = capsys.readouterr().err
    assert "reward-hacks/pack.toml: rule a" in err and "packs validate" in err

"""`warpsmith packs`: what the README promises of `packs list`, and one-line import refusals."""
from __future__ import annotations

import json

from warpsmith.cli import main


def test_list_prints_the_config_dir(tmp_path, monkeypatch, capsys):
    # README: "your config dir (`warpsmith packs list` prints it)"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.chdir(tmp_path)
    assert main(["packs", "list"]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "cfg" / "warpsmith" / "packs") in out.replace("\n", "")
    assert main(["packs", "list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["user_dir"] == str(tmp_path / "cfg" / "warpsmith" / "packs")


def test_import_of_a_non_archive_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    junk = tmp_path / "junk.tar.gz"
    junk.write_text("not an archive\n")
    assert main(["packs", "import", str(junk)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "junk.tar.gz: not a tar or tar.gz archive" in err

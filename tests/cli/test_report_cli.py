"""`warpsmith report`: an output name and a format that disagree are bad usage."""
from __future__ import annotations

from warpsmith.cli import main


def test_output_suffix_and_format_must_agree(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report", "any-session", "-o", "r.md", "--format", "html"]) == 2
    assert "disagree" in capsys.readouterr().err
    assert not (tmp_path / "r.md").exists()
    # agreeing ones get as far as looking the session up
    assert main(["report", "any-session", "-o", "r.html", "--format", "html"]) == 2
    assert "no session 'any-session'" in capsys.readouterr().err

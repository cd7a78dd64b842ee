"""Fixtures for pack tests: every test gets its own user config dir, project dir and no
WARPSMITH_PACKS, so packs on the developer's machine never leak in."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    # XDG_CONFIG_HOME only steers platformdirs on Linux; pin it everywhere so no test writes to
    # the real ~/Library or %APPDATA%.
    import platformdirs

    monkeypatch.setattr(platformdirs, "user_config_dir",
                        lambda appname=None, *a, **k: str(tmp_path / "config" / (appname or "")))
    monkeypatch.delenv("WARPSMITH_PACKS", raising=False)
    proj = tmp_path / "project"
    proj.mkdir()
    monkeypatch.chdir(proj)
    return tmp_path


def _write_pack(root: Path, pid: str, kind: str = "hardware", version: str = "1.0.0",
               files: dict[str, str] | None = None, extra: str = "", title: str | None = None,
               folder: str | None = None, sources: str | None = None) -> Path:
    """A pack folder root/<folder or id> with pack.toml and its files."""
    files = {"overview.md": f"# {pid}\n\nfacts about {pid}\n"} if files is None else files
    d = root / (folder or pid)
    d.mkdir(parents=True, exist_ok=True)
    names = ", ".join(f'"{n}"' for n in files)
    if sources is None:
        sources = '["https://example.org/source"]'
    (d / "pack.toml").write_text(textwrap.dedent(f"""\
        id = "{pid}"
        kind = "{kind}"
        title = "{title or pid.upper()} pack"
        version = "{version}"
        files = [{names}]
        sources = {sources}
        """) + extra)
    for n, t in files.items():
        (d / n).parent.mkdir(parents=True, exist_ok=True)
        (d / n).write_text(t)
    return d


@pytest.fixture
def write_pack():
    return _write_pack

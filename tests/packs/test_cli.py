"""`warpsmith packs ...` through the real CLI entry (warpsmith.cli.main), in-process."""
from __future__ import annotations

import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

from warpsmith.cli import main
from harness.authoring.packs import load_pack, user_packs_dir


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["packs", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def env_packs(tmp_path, monkeypatch, write_pack):
    root = tmp_path / "envpacks"
    write_pack(root, "hw", files={"a.md": "# Hopper\n\n- **TMA** moves tiles\n", "b.md": "second file\n"},
               extra='applies_to = { arch = ["sm_90"] }\n')
    monkeypatch.setenv("WARPSMITH_PACKS", str(root))
    return root


def test_list_json_shows_winner_origin_and_shadowed(capsys, env_packs, write_pack):
    write_pack(user_packs_dir(), "hw", title="user copy")
    rc, out, _ = run(capsys, "list", "--json")
    data = json.loads(out)
    hw = next(p for p in data["packs"] if p["id"] == "hw")
    assert rc == 0 and hw["origin"] == "env" and hw["path"] == str(env_packs / "hw")
    assert [s["origin"] for s in hw["shadows"]] == ["user"]
    rc, out, _ = run(capsys, "list")
    assert rc == 0 and "hw" in out and "env" in out and "user:" in out


def test_show_renders_markdown_and_sources(capsys, env_packs):
    rc, out, _ = run(capsys, "show", "hw")
    assert rc == 0
    assert "TMA moves tiles" in out and "**" not in out  # rendered by rich, not raw markdown
    assert "sources" in out and "1. https://example.org/source" in out
    assert out.index("Hopper") < out.index("second file")
    rc, out, _ = run(capsys, "show", "hw", "--raw")
    assert "- **TMA** moves tiles" in out
    rc, _, err = run(capsys, "show", "nope")
    assert rc == 2 and "no pack 'nope'" in err


def test_new_scaffolds_valid_packs_and_validate(capsys, tmp_path):
    for kind in ("hardware", "model", "rules"):
        rc, out, _ = run(capsys, "new", kind, f"my-{kind}", "--dir", str(tmp_path / "mine"))
        assert rc == 0, out
        p = load_pack(tmp_path / "mine" / f"my-{kind}")
        assert p.kind == kind and p.version == "0.1.0"
    rc, out, _ = run(capsys, "validate", str(tmp_path / "mine"))
    assert rc == 0 and out.count("ok: ") == 3 and "TODO placeholder" in out
    rc, _, err = run(capsys, "new", "model", "my-model", "--dir", str(tmp_path / "mine"))
    assert rc == 2 and "already exists" in err
    rc, _, err = run(capsys, "new", "model", "Bad Id", "--dir", str(tmp_path / "mine"))
    assert rc == 2 and "not a valid pack id" in err
    # default destination: the user's config dir, where discovery finds it
    rc, _, _ = run(capsys, "new", "model", "mm")
    assert rc == 0 and (user_packs_dir() / "mm" / "pack.toml").is_file()
    (tmp_path / "mine" / "my-model" / "overview.md").unlink()
    rc, out, _ = run(capsys, "validate", str(tmp_path / "mine" / "my-model" / "pack.toml"))
    assert rc == 1 and "files: 'overview.md' not found" in out
    rc, _, err = run(capsys, "validate", str(tmp_path / "nowhere"))
    assert rc == 2


def test_edit_runs_editor_then_validates(capsys, env_packs, tmp_path, monkeypatch):
    editor = tmp_path / "ed.py"
    monkeypatch.setattr(sys.stdin, "isatty", lambda: False)

    def use(edit: str) -> None:
        """$EDITOR becomes a script that makes one replacement in the first file it is given."""
        editor.write_text("import sys, pathlib\np = pathlib.Path(sys.argv[1])\n"
                          f"p.write_text(p.read_text().replace({edit}))\n")
        monkeypatch.setenv("EDITOR", f"{sys.executable} {editor}")

    use("'version = \"1.0.0\"', 'version = \"1.1.0\"'")
    rc, out, _ = run(capsys, "edit", "hw")
    assert rc == 0 and "ok: hw 1.1.0" in out and load_pack(env_packs / "hw").version == "1.1.0"
    use("'version = \"1.1.0\"', 'version = \"x\"'")
    rc, out, _ = run(capsys, "edit", "hw")
    assert rc == 1 and "pack.toml:4: version: bad version 'x'" in out
    # the broken pack can still be opened for a fix, through its error
    use("'version = \"x\"', 'version = \"1.2.0\"'")
    rc, out, _ = run(capsys, "edit", "hw")
    assert rc == 0 and "ok: hw 1.2.0" in out


def test_export_import_round_trip(capsys, env_packs, tmp_path):
    out_file = tmp_path / "hw.tar.gz"
    rc, out, _ = run(capsys, "export", "hw", "-o", str(out_file))
    assert rc == 0 and "3 files" in out
    first = out_file.read_bytes()
    run(capsys, "export", "hw", "-o", str(out_file))
    assert out_file.read_bytes() == first  # reproducible archive
    with tarfile.open(out_file) as t:
        names = t.getnames()
        man = json.loads(t.extractfile("MANIFEST.json").read())
    assert names == ["MANIFEST.json", "hw/pack.toml", "hw/a.md", "hw/b.md"]
    assert man["id"] == "hw" and set(man["files"]) == {"pack.toml", "a.md", "b.md"}
    assert man["sha256"] == load_pack(env_packs / "hw").sha256()
    dest = tmp_path / "installed"
    rc, out, err = run(capsys, "import", str(out_file), "--dir", str(dest))
    assert rc == 0, err
    assert load_pack(dest / "hw").sha256() == man["sha256"]
    rc, _, err = run(capsys, "import", str(out_file), "--dir", str(dest))
    assert rc == 1 and "already exists" in err and "--force" in err
    rc, _, err = run(capsys, "import", str(out_file), "--dir", str(dest), "--force")
    assert rc == 0
    assert sorted(p.name for p in dest.iterdir()) == ["hw"]  # no staging leftovers
    # default destination is the user's pack folder; a folder imports too
    rc, _, err = run(capsys, "import", str(env_packs / "hw"))
    assert rc == 0 and load_pack(user_packs_dir() / "hw").sha256() == man["sha256"]


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz") as t:
        for ti, data in members:
            if data is not None:
                ti.size = len(data)
            t.addfile(ti, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


PACK_TOML = (b'id = "x"\nkind = "model"\ntitle = "X"\nversion = "1.0.0"\nfiles = ["a.md"]\n'
             b'sources = ["s"]\n')


@pytest.mark.parametrize("case,expect", [
    ("dotdot", "'..' would escape"),
    ("absolute", "absolute path"),
    ("symlink", "links are not allowed"),
    ("hardlink", "links are not allowed"),
    ("device", "not a regular file"),
])
def test_import_refuses_escapes(capsys, tmp_path, case, expect):
    members = [_file("x/pack.toml", PACK_TOML), _file("x/a.md", b"hi")]
    if case == "dotdot":
        members.append(_file("x/../../evil.md", b"pwned"))
    elif case == "absolute":
        members.append(_file("/tmp/evil.md", b"pwned"))
    elif case in ("symlink", "hardlink"):
        ti = tarfile.TarInfo("x/b.md")
        ti.type = tarfile.SYMTYPE if case == "symlink" else tarfile.LNKTYPE
        ti.linkname = "/etc/passwd"
        members.append((ti, None))
    else:
        ti = tarfile.TarInfo("x/dev")
        ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 3
        members.append((ti, None))
    arc = _tar(tmp_path / "bad.tar.gz", members)
    dest = tmp_path / "dest"
    rc, _, err = run(capsys, "import", str(arc), "--dir", str(dest))
    assert rc == 1 and expect in err, err
    assert not (tmp_path / "evil.md").exists() and not (dest / "x").exists()


def test_import_refuses_tampered_or_unlisted_files_and_invalid_packs(capsys, env_packs, tmp_path):
    good = tmp_path / "hw.tar.gz"
    run(capsys, "export", "hw", "-o", str(good))
    with tarfile.open(good) as t:
        blobs = {m.name: t.extractfile(m).read() for m in t.getmembers()}
    dest = tmp_path / "dest"

    def attempt(mutate) -> str:
        b = dict(blobs)
        mutate(b)
        arc = _tar(tmp_path / "t.tar.gz", [_file(n, d) for n, d in b.items()])
        rc, _, err = run(capsys, "import", str(arc), "--dir", str(dest))
        assert rc == 1 and not (dest / "hw").exists()
        return err

    assert "does not match the manifest" in attempt(lambda b: b.update({"hw/a.md": b"# Hopper has 999 SMs\n"}))
    assert "not in the manifest" in attempt(lambda b: b.update({"hw/extra.py": b"import os"}))
    assert "in the manifest but not in the archive" in attempt(lambda b: b.pop("hw/b.md"))
    # a folder without a manifest is validated before install
    bad = tmp_path / "badpack"
    bad.mkdir()
    (bad / "pack.toml").write_text(PACK_TOML.decode().replace("1.0.0", "v1"))
    (bad / "a.md").write_text("x")
    rc, _, err = run(capsys, "import", str(bad), "--dir", str(dest))
    assert rc == 1 and "invalid pack" in err and "version" in err


def test_show_rules_pack_lists_rules(capsys, tmp_path, monkeypatch, write_pack):
    pytest.importorskip("harness.guard.rules")
    root = tmp_path / "r"
    write_pack(root, "myrules", kind="rules", sources="[]", files={"why.md": "Because.\n"}, extra=(
        '\n[[rule]]\nid = "long-shapes"\nmessage = "Handle the long shapes."\nruntime = "long-context"\n'))
    rc, out, _ = run(capsys, "--path", str(root), "show", "myrules")
    assert rc == 0 and "long-shapes" in out and "runtime: long-context" in out and "Because." in out
    rc, out, _ = run(capsys, "validate", str(root))
    assert rc == 0 and "1 rules" in out


def test_default_explains_the_selection(capsys):
    rc, out, _ = run(capsys, "default", "softmax", "--arch", "sm_90a", "--gpu", "NVIDIA H200")
    first = out.splitlines()[0].split()
    assert rc == 0 and first[0] == "h200" and "dsl-triton" in first and "is sm_90a and names H200" in out
    rc, _, err = run(capsys, "default", "no-such-task", "--arch", "sm_90")
    assert rc == 2 and "no such task" in err


def test_WARPSMITH_CONFIG_DIR_holds_the_packs_as_well_as_config_toml(capsys, tmp_path, monkeypatch):
    """One config folder: the variable that moves config.toml and prices.toml moves packs too, for
    `packs new` and for discovery (hardware/model packs and rules packs alike)."""
    from harness.agents.config import config_path
    from harness.guard.rules import pack_search_dirs

    monkeypatch.setenv("WARPSMITH_CONFIG_DIR", str(tmp_path / "cfg"))
    rc, _, _ = run(capsys, "new", "rules", "house-rules")
    assert rc == 0 and (tmp_path / "cfg" / "packs" / "house-rules" / "pack.toml").is_file()
    assert config_path() == tmp_path / "cfg" / "config.toml"
    assert tmp_path / "cfg" / "packs" in pack_search_dirs()
    rc, out, _ = run(capsys, "list")
    assert rc == 0 and "house-rules" in out

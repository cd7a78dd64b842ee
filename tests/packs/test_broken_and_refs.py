"""A broken user pack that shadows a built-in id is said at its row and stops any run that selects
it (file and line, exit 2) instead of the built-in copy being used; pack commands take an id or a
path; `packs new hardware` scaffolds an AMD GPU; the [hardware] table is validated line by line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from warpsmith.cli import main
from harness.authoring.packs import (BUILTIN_PACKS, BrokenPackError, HardwareChoice, PackError, Selection, discover,
                           explain_default_selection, load_pack, session_selection, user_packs_dir)
from tests.packs.test_selection import T


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def broken_h200() -> Path:
    """The user's copy of h200 with a version that isn't a string (line 4)."""
    d = user_packs_dir() / "h200"
    shutil.copytree(BUILTIN_PACKS / "hardware" / "h200", d)
    toml = d / "pack.toml"
    toml.write_text(toml.read_text().replace('version = "1.1.0"', "version = 1.1"))
    return toml


def test_broken_user_copy_outranks_the_builtin_and_get_refuses(broken_h200):
    cat = discover()
    assert "h200" in cat.broken and cat.packs["h200"].origin == "builtin"
    with pytest.raises(BrokenPackError) as e:
        cat.get("h200")
    assert str(e.value).startswith(f"{broken_h200}:4: version: bad version 1.1")
    assert e.value.fallback.origin == "builtin"
    # A valid project copy outranks the broken user one: then nothing is broken.
    proj = Path.cwd() / ".warpsmith" / "packs" / "h200"
    shutil.copytree(BUILTIN_PACKS / "hardware" / "h200", proj)
    cat = discover()
    assert "h200" not in cat.broken and cat.get("h200").origin == "project"


def test_packs_list_marks_the_row(capsys, monkeypatch, broken_h200):
    monkeypatch.setenv("COLUMNS", "400")  # one table row per line
    rc, out, _ = run(capsys, "packs", "list")
    lines = out.splitlines()
    i = next(i for i, line in enumerate(lines) if "h200 BROKEN" in line)
    assert rc == 0 and f"{broken_h200}:4" in lines[i] and "builtin" in lines[i]
    assert "bad version 1.1" in lines[i + 1] and "A run selecting h200 stops until this is fixed; the builtin " \
        "copy above is not used instead" in lines[i + 1]
    rc, out, _ = run(capsys, "packs", "list", "--json")
    assert "h200" in json.loads(out)["broken"]


def test_commands_refuse_a_broken_id_naming_file_and_line(capsys, broken_h200):
    rc, out, _ = run(capsys, "packs", "validate", "h200")
    assert rc == 1 and f"{broken_h200}:4: version" in out
    for cmd in (["packs", "show", "h200"], ["packs", "export", "h200", "-o", "x.tar.gz"]):
        rc, _, err = run(capsys, *cmd)
        assert rc == 2 and f"{broken_h200}:4: version" in err and "takes precedence over the builtin" in err


def test_a_run_selecting_the_broken_id_stops_before_a_session(capsys, broken_h200):
    rc, _, err = run(capsys, "run", "softmax", "--headless", "--auto", "--iterations", "1", "--packs", "h200")
    assert rc == 2 and err.strip().count("\n") == 0 and f"{broken_h200}:4: version" in err
    assert not (Path.cwd() / ".warpsmith" / "sessions").exists()


def test_the_default_for_an_h200_with_a_broken_copy_is_refused(broken_h200):
    cat = discover()
    ids, notes = explain_default_selection(T(), cat, arch="sm_90", gpu_name="NVIDIA H200")
    assert ids[0] == "h200"
    with pytest.raises(BrokenPackError, match=":4: version"):
        Selection(ids).resolve(cat)


def test_packs_flag_names_the_hardware_pack_chosen():
    cat = discover()
    sel, notes, hardware = session_selection(T(), cat, add=["l40s"], arch=None)
    assert "l40s" in sel.ids
    # the person's pick replaces detection's "none chosen": one hardware line, typed
    assert hardware == HardwareChoice("l40s", "hardware l40s: chosen with --packs")
    assert not any("hardware" in n for n in notes)


def test_the_hardware_choice_follows_the_flags():
    cat = discover()
    _, notes, hardware = session_selection(T(), cat, arch="sm_90", gpu_name="NVIDIA H200")
    assert hardware.pack_id == "h200" and hardware.reason.startswith("hardware h200: ")
    assert hardware.reason not in notes  # said once, as the choice
    sel, _, hardware = session_selection(T(), cat, remove=["h200"], arch="sm_90", gpu_name="NVIDIA H200")
    assert "h200" not in sel.ids and hardware == HardwareChoice(None, "hardware: none chosen: h200 removed "
                                                                      "with --no-packs")
    # a second hardware pack beside the detected one: the person's is the choice, detection's a note
    sel, notes, hardware = session_selection(T(), cat, add=["l40s"], arch="sm_90", gpu_name="NVIDIA H200")
    assert sel.ids[0] == "h200" and "l40s" in sel.ids and hardware.pack_id == "l40s"
    assert any(n.startswith("hardware h200: ") for n in notes)
    # a saved selection (a resume) chooses nothing
    assert session_selection(T(), cat, saved=Selection(["h200"]))[2] is None


def test_pack_commands_take_an_id_or_a_path(capsys, tmp_path):
    rc, out, _ = run(capsys, "packs", "validate", "l40s")
    assert rc == 0 and "ok: l40s 1.0.0" in out
    rc, out, _ = run(capsys, "packs", "show", str(BUILTIN_PACKS / "hardware" / "mi300x"))
    assert rc == 0 and "wavefront size 64" in out and "ABSENT on this GPU" in out
    rc, out, _ = run(capsys, "packs", "show", "rtx5090")
    assert rc == 0 and "tcgen05" in out and "ABSENT" in out
    rc, out, _ = run(capsys, "packs", "export", str(BUILTIN_PACKS / "hardware" / "a100"), "-o", str(tmp_path / "a.tgz"))
    assert rc == 0 and (tmp_path / "a.tgz").is_file()
    rc, _, err = run(capsys, "packs", "validate", "nosuch")
    assert rc == 2 and "nosuch: no such pack id, file or folder" in err
    rc, _, err = run(capsys, "packs", "show", "./nosuch")
    assert rc == 2 and "./nosuch: no such file or folder" in err


def test_new_hardware_scaffolds_an_amd_gpu(capsys, tmp_path):
    rc, out, _ = run(capsys, "packs", "new", "hardware", "mi325", "--arch", "gfx942", "--dir", str(tmp_path))
    p = load_pack(tmp_path / "mi325")
    assert rc == 0 and p.applies_to["arch"] == ["gfx942"]
    assert p.raw["hardware"]["vendor"] == "amd" and p.raw["hardware"]["warp_size"] == 64
    rc, out, _ = run(capsys, "packs", "validate", str(tmp_path / "mi325"))
    assert rc == 0 and "hardware.architecture: still a TODO placeholder" in out
    for bad, says in ((["--arch", "sm_99z"], "a compiler target like"),
                      (["--arch", "gfx942", "--vendor", "nvidia"], "is not a nvidia target")):
        rc, _, err = run(capsys, "packs", "new", "hardware", "zz", *bad, "--dir", str(tmp_path))
        assert rc == 2 and says in err


@pytest.mark.parametrize("table,field,says", [
    ('vendor = "intel"', "hardware.vendor", "one of nvidia, amd"),
    ('arch = "gfx942"', "hardware.arch", "is not a nvidia target"),
    ('features = ["wgmma", "warp-magic"]', "hardware.features", "unknown feature 'warp-magic'"),
    ('absent = ["tma", "mma.sync"]', "hardware.absent", "'mma.sync' is listed as present and absent"),
    ('warp_size = 48', "hardware.warp_size", "48: 32"),
    ('colour = "green"', "hardware.colour", "unknown key"),
])
def test_hardware_table_errors_name_file_line_and_field(tmp_path, write_pack, table, field, says):
    base = {"vendor": '"nvidia"', "arch": '"sm_89"', "architecture": '"Ada"', "warp_size": "32",
            "matrix_units": '"mma.sync"', "features": '["mma.sync"]', "absent": '["tma"]',
            "triton": '"yes"', "cute_dsl": '"no"'}
    key = table.split(" = ")[0]
    base[key] = table.split(" = ", 1)[1]
    body = "\n".join(f"{k} = {v}" for k, v in base.items())
    d = write_pack(tmp_path, "hx", extra=f"\n[hardware]\n{body}\n")
    with pytest.raises(PackError) as e:
        load_pack(d)
    text = (d / "pack.toml").read_text().splitlines()
    assert e.value.field == field and says in e.value.problem
    assert e.value.line is not None and text[e.value.line - 1].startswith(field.split(".")[1]) \
        or e.value.line is not None and "[hardware]" in text[e.value.line - 1]


def test_hardware_table_only_in_hardware_packs(tmp_path, write_pack):
    d = write_pack(tmp_path, "rx", kind="rules", sources="[]", extra='\n[hardware]\nvendor = "amd"\n')
    with pytest.raises(PackError, match="only hardware packs have a \\[hardware\\] table"):
        load_pack(d)


def test_picker_marks_a_broken_id(broken_h200):
    from tui.screens.packs import grouped_selections

    rows = {r.value: r.prompt.plain for r in grouped_selections(discover(), [])}
    assert f"BROKEN: {broken_h200}:4" in rows["h200"] and "BROKEN" not in rows["l40s"]

"""A hardware pack's [specs]: `packs new hardware` lists every figure the harness reads, `packs validate`
warns for each one missing (file, field, who reads it), and no hint names a pack that doesn't exist."""
from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from warpsmith.cli import main
from harness.authoring.hardware import LEGACY_SPECS, SPECS
from harness.authoring.packs import BUILTIN_PACKS, load_pack, user_packs_dir

REPO = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_every_specs_figure_read_in_harness_is_one_the_scaffold_and_validate_know():
    """A figure some built-in pack states (or an older name of one) that code in harness/ spells is read
    by it: it must be in SPECS, or a pack without it fails silently where `packs validate` said ok."""
    stated = {k for toml in (BUILTIN_PACKS / "hardware").glob("*/pack.toml")
              for k in tomllib.loads(toml.read_text()).get("specs", {})} | set(LEGACY_SPECS)
    spelled = {}
    for path in REPO.glob("harness/**/*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in stated:
                spelled.setdefault(node.value, f"{path.relative_to(REPO)}:{node.lineno}")
    unknown = {k: where for k, where in spelled.items() if k not in SPECS and k not in LEGACY_SPECS}
    assert unknown == {}, "add these to harness/authoring/hardware.py SPECS"
    assert {"mem_tb_s", "bf16_dense_tflops", "smem_per_block_kib", "warps_per_sm", "measured_copy_tb_s"} <= set(spelled)


def test_the_scaffold_names_every_figure_and_validate_warns_until_each_is_filled(capsys, tmp_path):
    rc, out, _ = run(capsys, "packs", "new", "hardware", "my-gpu", "--arch", "sm_89", "--dir", str(tmp_path))
    assert rc == 0, out
    toml = tmp_path / "my-gpu" / "pack.toml"
    text = toml.read_text()
    for name in SPECS:  # each there, commented out: a placeholder number would be read as this GPU's
        assert re.search(rf"^# {name} = 0 ", text, re.M), name
    rc, out, _ = run(capsys, "packs", "validate", str(toml.parent))
    assert rc == 0
    for name, field in SPECS.items():
        line = next(l for l in out.splitlines() if f"specs.{name}:" in l)
        assert line.startswith(f"warning: {toml}: specs.{name}: missing") and field.read_by in line
    # Filled in: not one specs warning is left.
    filled = re.sub(r"^# (\w+) = 0 .*$", lambda m: f"{m.group(1)} = 1", text, flags=re.M)
    toml.write_text(filled)
    assert set(load_pack(toml.parent).raw["specs"]) == set(SPECS)
    rc, out, _ = run(capsys, "packs", "validate", str(toml.parent))
    assert rc == 0 and "specs." not in out


def test_an_older_hbm_name_counts_as_its_mem_name(capsys, tmp_path, write_pack):
    d = write_pack(tmp_path, "old", extra='applies_to = { arch = ["sm_90"] }\n[specs]\nhbm_tb_s = 3.0\n')
    rc, out, _ = run(capsys, "packs", "validate", str(d))
    assert rc == 0 and "specs.mem_tb_s" not in out and "specs.bf16_dense_tflops: missing" in out


def test_the_edit_hint_names_the_folder_a_pack_was_made_in(capsys, tmp_path):
    """Made with --dir outside every searched folder, the pack has no id `packs edit` finds: the hint
    gives its folder, which works."""
    rc, out, _ = run(capsys, "packs", "new", "model", "elsewhere", "--dir", str(tmp_path / "mine"))
    assert rc == 0
    assert f"warpsmith packs edit {tmp_path / 'mine' / 'elsewhere'}" in out
    assert "packs edit elsewhere " not in out


def test_a_broken_pack_with_no_other_copy_offers_no_other(capsys):
    d = user_packs_dir() / "only-mine"
    d.mkdir(parents=True)
    (d / "pack.toml").write_text('id = "only-mine"\nkind = "hardware"\ntitle = "x"\nversion = 1\n')
    rc, _, err = run(capsys, "packs", "export", "only-mine", "-o", "x.tar.gz")
    assert rc == 2 and f"{d / 'pack.toml'}:4: version" in err
    assert "no other copy of it exists; fix the file" in err and "the other" not in err

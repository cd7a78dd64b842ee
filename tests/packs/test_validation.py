from __future__ import annotations

from pathlib import Path

import pytest

from harness.authoring.packs import PackError, discover, load_pack, load_root


def test_valid_pack_loads_with_content_in_order(tmp_path, write_pack):
    d = write_pack(tmp_path, "h9", files={"b.md": "second?\n", "a.md": "first?\n"},
                   extra='applies_to = { arch = ["sm_90", "sm_90a"], gpu = "H9" }\n')
    p = load_pack(d)
    assert (p.id, p.kind, p.version, p.files) == ("h9", "hardware", "1.0.0", ["b.md", "a.md"])
    assert p.applies_to == {"arch": ["sm_90", "sm_90a"], "gpu": ["H9"]}
    assert p.content() == "second?\n\nfirst?"
    prov = p.provenance()
    assert prov["id"] == "h9" and prov["version"] == "1.0.0" and len(prov["sha256"]) == 64


def test_hash_is_stable_and_sensitive(tmp_path, write_pack):
    d1 = write_pack(tmp_path / "x", "h9")
    d2 = write_pack(tmp_path / "y", "h9")
    assert load_pack(d1).sha256() == load_pack(d2).sha256()  # same bytes, other folder: same hash
    (d2 / "overview.md").write_text("# h9\n\nfacts about h9!\n")
    assert load_pack(d1).sha256() != load_pack(d2).sha256()


def _err(d: Path) -> PackError:
    with pytest.raises(PackError) as ei:
        load_pack(d)
    return ei.value


def test_missing_file_names_file_line_and_field(tmp_path, write_pack):
    d = write_pack(tmp_path, "h9", files={"a.md": "x"})
    t = (d / "pack.toml").read_text().replace('files = ["a.md"]', 'files = [\n  "a.md",\n  "gone.md",\n]')
    (d / "pack.toml").write_text(t)
    e = _err(d)
    line = t.splitlines().index('  "gone.md",') + 1
    assert str(e).startswith(f"{d / 'pack.toml'}:{line}: files: 'gone.md' not found")
    assert e.line == line and e.field == "files"


@pytest.mark.parametrize("field,bad,expect", [
    ("kind", '"gpu"', "unknown kind 'gpu'"),
    ("version", '"1.0"', "bad version '1.0'"),
    ("version", "1", "bad version 1"),
    ("id", '"Has Space"', "not a valid id"),
    ("title", '""', "missing or empty"),
])
def test_bad_fields_are_refused_with_their_line(tmp_path, write_pack, field, bad, expect):
    d = write_pack(tmp_path, "h9")
    lines = (d / "pack.toml").read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.startswith(f"{field} ="))
    lines[i] = f"{field} = {bad}"
    (d / "pack.toml").write_text("\n".join(lines) + "\n")
    e = _err(d)
    assert e.field == field and e.line == i + 1 and expect in str(e), str(e)


def test_hardware_and_model_packs_need_sources(tmp_path, write_pack):
    e = _err(write_pack(tmp_path, "m1", kind="model", sources="[]"))
    assert e.field == "sources" and "must name its sources" in str(e) and e.line == 6


def test_syntax_error_gives_the_parser_line(tmp_path, write_pack):
    d = write_pack(tmp_path, "h9")
    (d / "pack.toml").write_text((d / "pack.toml").read_text() + "oops = = 1\n")
    e = _err(d)
    assert e.field == "toml" and e.line == 7


def test_unknown_key_and_bad_applies_to(tmp_path, write_pack):
    e = _err(write_pack(tmp_path / "a", "h9", extra="fils = 1\n"))
    assert e.field == "fils" and e.line == 7 and "unknown key" in str(e)
    e = _err(write_pack(tmp_path / "b", "h9", extra='[applies_to]\narch = ["hopper"]\n'))
    assert e.field == "applies_to.arch" and e.line == 8 and "'hopper'" in str(e)
    e = _err(write_pack(tmp_path / "c", "h9", extra='applies_to = { chip = "x" }\n'))
    assert e.field == "applies_to.chip" and e.line == 7


def test_a_spec_that_is_not_a_number_is_named_with_its_line(tmp_path, write_pack):
    e = _err(write_pack(tmp_path / "a", "h9", extra='[specs]\nhbm_tb_s = 4.8\nsm_count = "many"\n'))
    assert e.field == "specs.sm_count" and e.line == 9 and "'many'" in str(e)


def test_files_must_stay_inside_the_pack(tmp_path, write_pack):
    (tmp_path / "secret.md").write_text("outside")
    d = write_pack(tmp_path / "a", "h9", files={"a.md": "x"})
    (d / "pack.toml").write_text((d / "pack.toml").read_text().replace('"a.md"', '"../../secret.md"'))
    assert "relative path inside the pack" in str(_err(d))
    (d / "link.md").symlink_to(tmp_path / "secret.md")
    (d / "pack.toml").write_text((d / "pack.toml").read_text().replace('"../../secret.md"', '"link.md"'))
    assert "symbolic link" in str(_err(d))


def test_rules_only_in_rules_packs(tmp_path, write_pack):
    e = _err(write_pack(tmp_path, "h9", extra='[[rule]]\nid = "x"\nmessage = "m"\nruntime = "long-context"\n'))
    assert e.field == "rule[0]" and e.line == 7


def test_bad_pack_is_refused_and_the_rest_still_load(tmp_path, write_pack):
    root = tmp_path / "root"
    write_pack(root, "good")
    write_pack(root, "worse", kind="nonsense")
    write_pack(root / "hardware", "twin", title="one")
    write_pack(root / "other", "twin", title="two")
    packs, errors = load_root(root, "env")
    assert [p.id for p in packs] == ["good"]
    msgs = sorted(str(e) for e in errors)
    assert len(msgs) == 3
    assert any("unknown kind 'nonsense'" in m for m in msgs)
    dup = [m for m in msgs if "duplicate id 'twin'" in m]
    assert len(dup) == 2 and all(":1: id:" in m for m in dup)


def test_rules_pack_compiles_rules_and_refuses_a_broken_one(tmp_path, write_pack):
    pytest.importorskip("harness.guard.rules")
    ok = write_pack(tmp_path / "a", "r1", kind="rules", extra=(
        '\n[[rule]]\nid = "no-eval"\nmessage = "Never call eval."\n'
        'query = "(call function: (identifier) @f (#eq? @f \\"eval\\"))"\n'
        '\n[[rule]]\nid = "long"\nmessage = "Handle long shapes."\nruntime = "long-context"\n'))
    p = load_pack(ok)
    assert [r.id for r in p.rules] == ["no-eval", "long"]
    bad = write_pack(tmp_path / "b", "r2", kind="rules", extra=(
        '\n[[rule]]\nid = "fine"\nmessage = "m"\nruntime = "long-context"\n'
        '\n[[rule]]\nid = "broken"\nmessage = "m"\nquery = "(call function: ((("\n'))
    e = _err(bad)
    text = (bad / "pack.toml").read_text().splitlines()
    assert "broken" in str(e) and e.line == text.index('id = "broken"') + 1, str(e)


def test_builtin_packs_all_validate(monkeypatch):
    """Smoke test over whatever ships in packs/: every built-in pack must load."""
    cat = discover()
    builtin_errors = [str(e) for e in cat.errors if "/packs/" in e.path.replace("\\", "/")]
    assert not builtin_errors, "\n".join(builtin_errors)
    for p in cat.packs.values():
        if p.origin == "builtin" and p.kind in ("hardware", "model"):
            assert p.sources and p.content().strip()


def test_rule_errors_point_at_the_rule(tmp_path, write_pack):
    pytest.importorskip("harness.guard.rules")
    d = write_pack(tmp_path / "a", "r3", kind="rules", sources="[]", extra=(
        '\n[[rule]]\nid = "ok"\nmessage = "m"\nruntime = "long-context"\n'
        '\n[[rule]]\nmessage = "no id"\nruntime = "long-context"\n'))
    e = _err(d)
    assert e.field == "rule #2" and e.line == (d / "pack.toml").read_text().splitlines().index("[[rule]]", 8) + 1
    d = write_pack(tmp_path / "b", "r4", kind="rules", sources="[]", extra=(
        '\n[[rule]]\nid = "made-up"\nmessage = "m"\nruntime = "no-such-check"\n'))
    e = _err(d)
    assert e.field == "rule made-up" and "no-such-check" in str(e) and e.line == 9

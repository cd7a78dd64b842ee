from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.authoring import packs as P
from harness.authoring.packs import PackError, Selection, default_selection, discover, explain_default_selection


@dataclass
class T:  # the fields of harness.authoring.tasks.Task that selection reads
    name: str = "softmax"
    dsl: str = "triton"
    models: list = field(default_factory=list)
    rules: list = field(default_factory=list)
    toml_path: Path = Path("kernels/softmax/task.toml")


@pytest.fixture
def catalog(tmp_path, monkeypatch, write_pack):
    b = tmp_path / "builtin"
    arch90 = 'applies_to = { arch = ["sm_90", "sm_90a"] }\n'
    write_pack(b / "hardware", "h100", extra=arch90)
    write_pack(b / "hardware", "h200", extra=arch90)
    write_pack(b / "hardware", "b200", extra='applies_to = { arch = ["sm_100a"], gpu = ["B200"] }\n')
    write_pack(b / "models", "dsv4", kind="model")
    write_pack(b / "models", "for-softmax", kind="model", extra='applies_to = { task = ["softmax"] }\n')
    write_pack(b / "rules", "guard", kind="rules", sources="[]")
    write_pack(b / "rules", "triton-idioms", kind="rules", sources="[]", extra='applies_to = { dsl = "triton" }\n')
    write_pack(b / "rules", "cute-idioms", kind="rules", sources="[]", extra='applies_to = { dsl = "cute" }\n')
    monkeypatch.setattr(P, "BUILTIN_PACKS", b)
    cat = discover()
    assert not cat.errors
    return cat


def test_gpu_name_breaks_an_arch_tie(catalog):
    assert default_selection(T(), catalog, arch="sm_90", gpu_name="NVIDIA H200")[0] == "h200"
    assert default_selection(T(), catalog, arch="sm_90", gpu_name="NVIDIA H100 80GB HBM3")[0] == "h100"
    # sm_100 device, pack says sm_100a: the same chip family
    assert default_selection(T(), catalog, arch="sm_100", gpu_name="NVIDIA B200")[0] == "b200"


def test_ambiguous_or_unknown_gpu_selects_no_hardware_and_says_why(catalog):
    ids, notes = explain_default_selection(T(), catalog, arch="sm_90", gpu_name="NVIDIA Graphics Device")
    assert not {"h100", "h200"} & set(ids)
    assert any("h100, h200 apply to sm_90 but none names 'NVIDIA Graphics Device'" in n for n in notes)
    ids, notes = explain_default_selection(T(), catalog, arch="sm_120", gpu_name="RTX 5090")
    assert not {"h100", "h200", "b200"} & set(ids) and "no hardware pack applies to sm_120" in notes[0]
    ids, notes = explain_default_selection(T(), catalog, arch=None, detect=False)
    assert "hardware: none chosen (no GPU given)" in notes[0] and "--packs ID" in notes[0]


def test_task_names_models_and_rules_and_applies_to_adds(catalog):
    ids = default_selection(T(models=["dsv4"], rules=["guard"]), catalog, arch="sm_90a", gpu_name="NVIDIA H200")
    assert ids == ["h200", "dsv4", "guard", "for-softmax", "triton-idioms"]
    ids = default_selection(T(name="other", dsl="cute"), catalog, arch="sm_100a", gpu_name="NVIDIA B200")
    assert ids == ["b200", "cute-idioms"]


def test_task_naming_a_missing_or_wrong_kind_pack_is_an_error(catalog):
    with pytest.raises(PackError, match=r"task.toml: models: no model pack 'nope' \(known model packs: dsv4, for-softmax\)"):
        default_selection(T(models=["nope"]), catalog, arch="sm_90")
    with pytest.raises(PackError, match="rules: pack 'h100' is a hardware pack"):
        default_selection(T(rules=["h100"]), catalog, arch="sm_90")


def test_selection_add_remove_save_load(catalog, tmp_path):
    s = Selection(["h200", "guard"])
    s.add("dsv4", catalog)
    s.add("dsv4", catalog)  # idempotent
    with pytest.raises(KeyError, match="no pack 'zz'"):
        s.add("zz", catalog)
    s.remove("guard")
    with pytest.raises(KeyError, match="not selected"):
        s.remove("guard")
    assert s.ids == ["h200", "dsv4"]
    assert [p.id for p in s.resolve(catalog)] == ["h200", "dsv4"]  # prompt order: hardware, model, rules
    assert Selection.from_json(s.to_json()) == s
    s.save(tmp_path)
    assert Selection.load(tmp_path).ids == ["h200", "dsv4"]
    assert Selection.load(tmp_path / "none").ids == []
    s2 = Selection(["guard", "dsv4"]).apply(add=["h100"], remove=["guard"], catalog=catalog)
    assert [p.id for p in s2.resolve(catalog)] == ["h100", "dsv4"]


def test_detect_gpu_arch_without_cuda():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(0)
        assert P.detect_gpu_arch() == f"sm_{major}{minor}"
    else:
        assert P.detect_gpu_arch() is None

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import pytest

from harness.authoring import packs as P
from harness.authoring.packs import discover


@pytest.fixture
def no_builtin(monkeypatch, tmp_path):
    """Point the built-in folder at an empty temp folder so the repo's own packs don't interfere."""
    b = tmp_path / "builtin"
    b.mkdir()
    monkeypatch.setattr(P, "BUILTIN_PACKS", b)
    return b


def test_precedence_builtin_user_project_env_path(tmp_path, monkeypatch, write_pack, no_builtin):
    write_pack(no_builtin / "hardware", "gpu", title="builtin")
    write_pack(no_builtin / "hardware", "only-builtin")
    user = P.user_packs_dir()
    assert str(user).startswith(str(tmp_path / "config"))  # the user dir comes from platformdirs (pinned in conftest)
    write_pack(user, "gpu", title="user")
    write_pack(Path.cwd() / ".warpsmith" / "packs", "gpu", title="project")
    env1, env2 = tmp_path / "env1", tmp_path / "env2"
    write_pack(env1, "gpu", title="env1")
    write_pack(env2, "gpu", title="env2")
    monkeypatch.setenv("WARPSMITH_PACKS", f"{env1}{__import__('os').pathsep}{env2}")
    cat = discover()
    assert cat.get("gpu").title == "env2 pack" and cat.get("gpu").origin == "env"
    assert cat.get("only-builtin").origin == "builtin"
    assert [(s.origin, s.title) for s in cat.shadows("gpu")] == [
        ("env", "env1 pack"), ("project", "project pack"), ("user", "user pack"), ("builtin", "builtin pack")]
    extra = tmp_path / "extra"
    write_pack(extra, "gpu", title="path")
    assert discover([extra]).get("gpu").origin == "path"
    with pytest.raises(KeyError, match="no pack 'nope' .*known: gpu, only-builtin"):
        cat.get("nope")


def test_missing_env_folder_is_an_error_not_a_crash(monkeypatch, tmp_path, no_builtin):
    monkeypatch.setenv("WARPSMITH_PACKS", str(tmp_path / "nowhere"))
    cat = discover()
    assert not cat.packs and "nowhere" in str(cat.errors[0]) and "not found" in str(cat.errors[0])


def test_same_folder_reached_twice_is_loaded_once(monkeypatch, write_pack, no_builtin):
    write_pack(no_builtin / "rules", "r")
    monkeypatch.setenv("WARPSMITH_PACKS", str(no_builtin / "rules"))
    cat = discover()
    assert cat.get("r").origin == "builtin" and not cat.shadowed and not cat.errors


def _install_dist(site: Path, name: str, entry_points: str, module: str, code: str) -> None:
    """A real installed distribution as pip would leave it: a module plus a .dist-info with
    METADATA and entry_points.txt, found through sys.path by importlib.metadata."""
    (site / f"{module}.py").write_text(code)
    di = site / f"{name.replace('-', '_')}-1.0.dist-info"  # as wheels name it
    di.mkdir(parents=True)
    (di / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (di / "entry_points.txt").write_text(f"[warpsmith.packs]\n{entry_points}\n")
    (di / "RECORD").write_text("")


def test_entry_point_packs(tmp_path, monkeypatch, write_pack, no_builtin):
    site = tmp_path / "site"
    site.mkdir()
    data = site / "ws_vendor_data"
    write_pack(data, "vendor-gpu", title="vendor")
    write_pack(data, "shared", title="vendor shared")
    write_pack(site / "single", "solo")
    _install_dist(site, "ws-vendor-packs", "vendor = ws_vendor:packs_dir\nsolo = ws_vendor:SOLO", "ws_vendor",
                  textwrap.dedent(f"""\
                      from pathlib import Path
                      SOLO = {str(site / 'single' / 'solo')!r}
                      def packs_dir():
                          return Path(__file__).parent / "ws_vendor_data"
                      """))
    _install_dist(site, "ws-broken", "broken = ws_broken_mod:nothing", "ws_broken_mod", "x = 1\n")
    monkeypatch.syspath_prepend(str(site))
    importlib.invalidate_caches()
    write_pack(P.user_packs_dir(), "shared", title="user shared")
    write_pack(no_builtin, "vendor-gpu", title="builtin")
    cat = discover()
    assert cat.get("vendor-gpu").origin == "entrypoint"  # an installed package beats the built-in copy...
    assert cat.get("shared").origin == "user"  # ...but never the user's own
    assert cat.get("solo").origin == "entrypoint"
    broken = [str(e) for e in cat.errors]
    assert len(broken) == 1 and "ws_broken_mod:nothing" in broken[0] and "ws-broken" in broken[0]
    for m in ("ws_vendor", "ws_broken_mod"):
        sys.modules.pop(m, None)

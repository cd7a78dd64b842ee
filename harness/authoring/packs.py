"""Context packs: folders of markdown (and TOML) that go into every prompt.

A pack is a folder with a `pack.toml` (id, kind, title, version, applies_to, files, sources and,
for rules packs, [[rule]] tables) plus the files it lists. This module loads and validates packs,
discovers them in every place a user can put one, picks a default selection for a task and a GPU,
hashes them for provenance, and watches the selected ones for live edits.

Validation errors are one line, "<file>:<line>: <field>: <problem>", because pack authors fix them
in an editor; tomllib gives no positions for keys, so lines are found by a small scan of the text.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.authoring.hardware import (ARCH_RE, detect as _detect, match_hardware,  # ARCH_RE: sm_90a, sm_89, gfx942
                              validate_hardware)
from harness.invocation import command
from harness.authoring.paths import builtin_dir, user_packs_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent
BUILTIN_PACKS = builtin_dir("packs")
ENTRY_POINT_GROUP = "warpsmith.packs"
KINDS = ("hardware", "model", "rules")
KIND_ORDER = {k: i for i, k in enumerate(KINDS)}
# Sources from lowest to highest precedence: a later one overrides an earlier one's id.
# Installed packages (entry points) rank just above the built-ins and below everything the user
# controls, so a person's own copy of a pack always wins over a third party's.
ORIGINS = ("builtin", "entrypoint", "user", "project", "env", "path")
TOP_KEYS = ("id", "kind", "title", "version", "applies_to", "files", "sources", "rule",
            "description", "authors", "license", "specs", "hardware", "allow")
APPLIES_KEYS = ("arch", "gpu", "dsl", "task")
ID_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
# Semantic versioning (https://semver.org): MAJOR.MINOR.PATCH with optional pre-release/build.
VERSION_RE = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                        r"(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?$")
MAX_FILE_BYTES = 1_000_000  # a pack is prose for a prompt; anything bigger is a mistake


class PackError(Exception):
    """A pack that can't be used. str(): "<file>:<line>: <field>: <problem>" (line when known)."""

    def __init__(self, path: Path | str, field: str, problem: str, line: int | None = None,
                 pack_id: str | None = None):
        self.path, self.field, self.problem, self.line = str(path), field, problem, line
        self.pack_id = pack_id
        where = self.path + (f":{line}" if line else "")
        super().__init__(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")


@dataclass
class Pack:
    id: str
    kind: str
    title: str
    version: str
    path: Path  # the pack's folder
    applies_to: dict[str, list[str]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    origin: str = "path"
    rules: list = field(default_factory=list)  # harness.guard.rules.Rule, rules packs only
    raw: dict[str, Any] = field(default_factory=dict)  # the parsed pack.toml
    _texts: dict[str, str] = field(default_factory=dict, repr=False)  # read once at load
    _digest: str = field(default="", repr=False)

    @property
    def toml_path(self) -> Path:
        return self.path / "pack.toml"

    @property
    def description(self) -> str:
        d = self.raw.get("description")
        return d if isinstance(d, str) else ""

    def file_text(self, name: str) -> str:
        if name not in self._texts:  # a Pack built by hand (tests, the TUI) rather than load_pack
            self._texts[name] = (self.path / name).read_text(encoding="utf-8")
        return self._texts[name]

    def content(self) -> str:
        """The pack's files concatenated in order (as loaded: an edit needs a reload)."""
        return "\n\n".join(self.file_text(f).strip("\n") for f in self.files)

    def sha256(self) -> str:
        """Hash of pack.toml and the listed files, in order, as loaded: stable across machines."""
        if not self._digest:
            toml = self.toml_path.read_bytes() if self.toml_path.is_file() else b""
            self._digest = content_digest([("pack.toml", toml)] +
                                          [(n, self.file_text(n).encode()) for n in self.files])
        return self._digest

    def provenance(self) -> dict[str, str]:
        return {"id": self.id, "version": self.version, "sha256": self.sha256(),
                "origin": self.origin, "path": str(self.path)}

    def rule_specs(self) -> list[dict[str, Any]]:
        """The raw [[rule]] tables (id, message, query | runtime) as written in pack.toml."""
        return [r for r in self.raw.get("rule", []) if isinstance(r, dict)]


def content_digest(parts: Iterable[tuple[str, bytes]]) -> str:
    """sha256 over (name, bytes) pairs, length-prefixed so that no two packs can collide by
    moving bytes from one file into the next."""
    h = hashlib.sha256()
    for name, data in parts:
        nb = name.encode()
        h.update(len(nb).to_bytes(8, "big") + nb + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


# -- where in the TOML text is a field ---------------------------------------------------------

_HEADER_RE = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def locate(text: str, field: str, value: str | None = None) -> int | None:
    """1-based line of `field` ("version", "applies_to.arch", "rule[2].query", "files") in a TOML
    text, or of `value` (a quoted string) inside that field's value when given. None if not found."""
    lines = text.splitlines()
    parts = field.split(".")
    m = re.match(r"^(\w+)\[(\d+)\]$", parts[0])
    table, index = (m.group(1), int(m.group(2))) if m else (None, None)
    # Find the block of lines where the key lives: top level, a [table], or the n-th [[table]].
    start, end, key = 0, len(lines), parts[-1]
    header_at = None
    if table is not None:
        seen = -1
        for i, ln in enumerate(lines):
            h = _HEADER_RE.match(ln)
            if h and ln.strip().startswith("[[") and h.group(1) == table:
                seen += 1
                if seen == index:
                    header_at = i
                    break
    if header_at is not None:
        if len(parts) == 1:
            return header_at + 1
        start = header_at
        end = next((j for j in range(start + 1, len(lines)) if _HEADER_RE.match(lines[j])), len(lines))
    elif table is not None and len(parts) > 1:
        return None
    elif table is not None:
        # "files[2]": an element of a top-level array: look for its value.
        key = table
        end = next((j for j, ln in enumerate(lines) if _HEADER_RE.match(ln)), len(lines))
    elif len(parts) > 1:
        # "applies_to.arch": a [applies_to] table, or an inline table on the top-level key line.
        for i, ln in enumerate(lines):
            h = _HEADER_RE.match(ln)
            if h and h.group(1) == parts[0]:
                start = i + 1
                end = next((j for j in range(start, len(lines)) if _HEADER_RE.match(lines[j])), len(lines))
                break
        else:
            top_end = next((j for j, ln in enumerate(lines) if _HEADER_RE.match(ln)), len(lines))
            for i in range(top_end):
                if re.match(rf"^\s*{re.escape(parts[0])}\s*=", lines[i]):
                    return i + 1
            return None
    else:
        end = next((j for j, ln in enumerate(lines) if _HEADER_RE.match(ln)), len(lines))
    key_re = re.compile(rf"^\s*(\"?){re.escape(key)}\1\s*=")
    for i in range(start, end):
        if key_re.match(lines[i]):
            if value is not None:
                quoted = re.compile(r"[\"']" + re.escape(value) + r"[\"']")
                for j in range(i, end):
                    if quoted.search(lines[j]):
                        return j + 1
                    if j > i and re.match(r"^\s*\w+\s*=", lines[j]):
                        break
            return i + 1
    return None


# -- loading one pack --------------------------------------------------------------------------

def _strlist(v: Any) -> list[str] | None:
    if isinstance(v, str):
        return [v]
    if isinstance(v, list) and all(isinstance(x, str) for x in v):
        return list(v)
    return None


def load_pack(folder: Path | str, origin: str = "path") -> Pack:
    """Load and validate the pack in `folder` (or the folder of a given pack.toml).

    Raises PackError naming the file, line and field of the first problem found.
    """
    folder = Path(folder)
    if folder.name == "pack.toml" and folder.is_file():
        folder = folder.parent
    toml_path = folder / "pack.toml"
    if not toml_path.is_file():
        raise PackError(toml_path, "", "missing: a pack is a folder with a pack.toml "
                        f"(run `{command('packs new KIND ID')}` for a valid skeleton)")
    raw_bytes = toml_path.read_bytes()
    try:
        text = raw_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise PackError(toml_path, "", f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        if "(at end of document)" in msg:
            line = max(1, len(text.splitlines()))
        msg = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", msg)
        raise PackError(toml_path, "toml", f"{msg}; fix the TOML syntax", line) from None

    def err(fld: str, problem: str, value: str | None = None) -> PackError:
        return PackError(toml_path, fld, problem, locate(text, fld, value),
                         pack_id=data.get("id") if isinstance(data.get("id"), str) else None)

    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise err(unknown[0], f"unknown key (known: {', '.join(TOP_KEYS)})")
    pid = data.get("id")
    if not isinstance(pid, str) or not pid:
        raise err("id", "missing or not a string")
    if not ID_RE.match(pid):
        raise err("id", f"{pid!r} is not a valid id: lowercase letters, digits, '.', '_' or '-', "
                  "starting with a letter or digit, at most 64 characters")
    kind = data.get("kind")
    if kind not in KINDS:
        raise err("kind", f"unknown kind {kind!r} (one of: {', '.join(KINDS)})")
    title = data.get("title")
    if not isinstance(title, str) or not title.strip():
        raise err("title", "missing or empty: a one-line title people see in `packs list`")
    version = data.get("version")
    if not isinstance(version, str) or not VERSION_RE.match(version):
        raise err("version", f"bad version {version!r}: use MAJOR.MINOR.PATCH, e.g. \"1.0.0\" "
                  "(a quoted string)")

    applies_raw = data.get("applies_to", {})
    if not isinstance(applies_raw, dict):
        raise err("applies_to", "must be a table, e.g. applies_to = { arch = [\"sm_90\"] }")
    applies: dict[str, list[str]] = {}
    for k, v in applies_raw.items():
        if k not in APPLIES_KEYS:
            raise err(f"applies_to.{k}", f"unknown key (known: {', '.join(APPLIES_KEYS)})")
        vals = _strlist(v)
        if vals is None:
            raise err(f"applies_to.{k}", "must be a string or a list of strings")
        if k == "arch":
            bad = [a for a in vals if not ARCH_RE.match(a)]
            if bad:
                raise err("applies_to.arch", f"{bad[0]!r} is not a compiler target like "
                          "\"sm_90\", \"sm_90a\", \"sm_100a\" or \"gfx942\"", bad[0])
        applies[k] = vals

    files = data.get("files", [])
    if _strlist(files) is None or isinstance(files, str):
        raise err("files", "must be a list of file names, injected in that order")
    if kind in ("hardware", "model") and not files:
        raise err("files", f"a {kind} pack needs at least one markdown file")
    texts: dict[str, str] = {}
    folder_real = folder.resolve()
    for name in files:
        pure = Path(name)
        if not name or pure.is_absolute() or ".." in pure.parts or "\\" in name:
            raise err("files", f"{name!r} must be a relative path inside the pack folder", name)
        if name in texts:
            raise err("files", f"{name!r} is listed twice", name)
        if name == "pack.toml":
            raise err("files", "pack.toml itself can't be a content file", name)
        fp = folder / name
        if fp.is_symlink() or (fp.exists() and not fp.resolve().is_relative_to(folder_real)):
            raise err("files", f"{name!r} is a symbolic link; packs hold plain files only", name)
        if not fp.is_file():
            raise err("files", f"{name!r} not found in {folder}: create it or remove it from files", name)
        b = fp.read_bytes()
        if len(b) > MAX_FILE_BYTES:
            raise err("files", f"{name!r} is {len(b)} bytes; a pack file must stay under "
                      f"{MAX_FILE_BYTES} (it goes into every prompt)", name)
        try:
            texts[name] = b.decode("utf-8")
        except UnicodeDecodeError as e:
            raise err("files", f"{name!r} is not UTF-8 text ({e.reason} at byte {e.start})", name) from None

    sources = data.get("sources", [])
    if _strlist(sources) is None or isinstance(sources, str):
        raise err("sources", "must be a list of strings (URLs or document titles with sections)")
    if kind in ("hardware", "model") and not [s for s in sources if s.strip()]:
        raise err("sources", f"a {kind} pack must name its sources: the documents every fact "
                  "in it was checked against")

    rule_raw = data.get("rule", [])
    if not isinstance(rule_raw, list) or not all(isinstance(r, dict) for r in rule_raw):
        raise err("rule", "must be [[rule]] tables")
    if rule_raw and kind != "rules":
        raise err("rule[0]", f"only rules packs have [[rule]] tables; this pack's kind is {kind!r}")
    specs = data.get("specs", {})
    if not isinstance(specs, dict):
        raise err("specs", "must be a table of numbers, e.g. specs = { mem_tb_s = 4.8 }")
    for k, v in specs.items():
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            raise err(f"specs.{k}", f"must be a number, not {v!r} (e.g. {k} = 132)")
    if "hardware" in data:
        if kind != "hardware":
            raise err("hardware", f"only hardware packs have a [hardware] table; this pack's kind is {kind!r}")
        validate_hardware(data["hardware"], err)
    rules: list = []
    if kind == "rules" and rule_raw:
        rules = _compile_rules(rule_raw, pid, toml_path, text)

    digest = content_digest([("pack.toml", raw_bytes)] + [(n, texts[n].encode()) for n in files])
    return Pack(id=pid, kind=kind, title=title.strip(), version=version, path=folder,
                applies_to=applies, files=list(files), sources=list(sources), origin=origin,
                rules=rules, raw=data, _texts=texts, _digest=digest)


def _compile_rules(rule_raw: list[dict], pid: str, toml_path: Path, text: str) -> list:
    try:  # tree-sitter and the rule engine (~40 ms): only rules packs need it, and --help loads this module
        from harness.guard.rules import RuleError, compile_rules
    except ImportError as e:
        raise PackError(toml_path, "rule", f"can't validate rules: the rule engine "
                        f"(harness.guard.rules) is unavailable: {e}", pack_id=pid) from None
    try:
        return list(compile_rules(rule_raw, pid, toml_path))
    except RuleError as e:
        rid = getattr(e, "rule_id", None)
        problem = getattr(e, "problem", None) or str(e)
        # RuleError names the rule by id, or "#N" (1-based) when the id itself is bad.
        index = None
        if isinstance(rid, str) and rid.startswith("#") and rid[1:].isdigit():
            index = int(rid[1:]) - 1
        elif rid is not None:
            index = next((i for i, r in enumerate(rule_raw) if isinstance(r, dict) and r.get("id") == rid), None)
        line = locate(text, f"rule[{index}].id") or locate(text, f"rule[{index}]") if index is not None else None
        raise PackError(toml_path, f"rule {rid}" if rid else "rule", problem, line, pack_id=pid) from None


# -- discovery ---------------------------------------------------------------------------------



def project_packs_dir() -> Path:
    return Path.cwd() / ".warpsmith" / "packs"


def env_pack_dirs() -> list[Path]:
    return [Path(p) for p in os.environ.get("WARPSMITH_PACKS", "").split(os.pathsep) if p]


def find_pack_dirs(root: Path, depth: int = 3) -> list[Path]:
    """Pack folders under root: root itself, root/<id>, or root/<kind>/<id>. A folder with a
    pack.toml is a pack; nothing below it is searched."""
    if (root / "pack.toml").is_file():
        return [root]
    if depth == 0 or not root.is_dir():
        return []
    out: list[Path] = []
    try:
        children = sorted(root.iterdir())
    except OSError:
        return []
    for sub in children:
        if sub.is_dir() and not sub.name.startswith((".", "_")) and not sub.is_symlink():
            out += find_pack_dirs(sub, depth - 1)
    return out


def _entry_point_dirs() -> tuple[list[Path], list[PackError]]:
    from importlib.metadata import entry_points  # (~20 ms: when packs are discovered, not at every CLI start)

    dirs, errors = [], []
    for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: (e.name, e.value)):
        where = f"entry point {ep.name} = {ep.value!r} (group {ENTRY_POINT_GROUP})"
        try:
            obj = ep.load()
            if callable(obj):
                obj = obj()
            items = obj if isinstance(obj, (list, tuple)) else [obj]
            for it in items:
                if not isinstance(it, (str, os.PathLike)):
                    raise TypeError(f"gave {type(it).__name__}, expected a folder path")
                dirs.append(Path(it))
        except Exception as e:  # a broken third-party package must not hide every other pack
            dist = getattr(getattr(ep, "dist", None), "name", "?")
            errors.append(PackError(where, "", f"{type(e).__name__}: {e} "
                                    f"(fix or uninstall the package {dist!r})"))
    return dirs, errors


class BrokenPackError(PackError):
    """The copy of a pack id that would win (a user's pack over a built-in one) failed to load.
    Selecting that id is refused rather than silently falling back to the lower-precedence copy:
    the person meant their own pack, and needs the file and line to fix it."""

    @classmethod
    def of(cls, e: PackError, pack_id: str, fallback: "Pack | None") -> "BrokenPackError":
        b = cls(e.path, e.field, e.problem, e.line, pack_id=pack_id)
        b.fallback = fallback
        return b


@dataclass
class Catalog:
    packs: dict[str, Pack] = field(default_factory=dict)  # id -> the winning pack
    shadowed: list[Pack] = field(default_factory=list)  # packs overridden by a later source
    errors: list[PackError] = field(default_factory=list)
    # id -> the error of a broken pack that outranks every valid pack of that id (or has none):
    # that id can't be used until the file is fixed. The valid lower-precedence copy stays in
    # `packs` so `packs list` can show which one it would have been.
    broken: dict[str, PackError] = field(default_factory=dict)

    def get(self, id: str) -> Pack:
        if id in self.broken:
            e = self.broken[id]
            fb = self.packs.get(id)
            raise BrokenPackError.of(e, id, fb) if isinstance(e, PackError) else e
        try:
            return self.packs[id]
        except KeyError:
            known = ", ".join(sorted(self.packs)) or "none"
            raise KeyError(f"no pack {id!r} (known: {known})") from None

    def shadows(self, id: str) -> list[Pack]:
        """Packs with this id that lost to the winner, highest precedence first."""
        return [p for p in reversed(self.shadowed) if p.id == id]

    def sorted(self) -> list[Pack]:
        return sorted(self.packs.values(), key=lambda p: (KIND_ORDER[p.kind], p.id))


def pack_sources(extra_paths: Iterable[Path] = ()) -> tuple[list[tuple[str, Path]], list[PackError]]:
    """(origin, root) for every place packs are looked for, lowest precedence first, and the
    errors of entry points that could not be resolved."""
    eps, errors = _entry_point_dirs()
    out: list[tuple[str, Path]] = [("builtin", BUILTIN_PACKS)]
    out += [("entrypoint", d) for d in eps]
    out += [("user", user_packs_dir()), ("project", project_packs_dir())]
    out += [("env", d) for d in env_pack_dirs()]
    out += [("path", Path(d)) for d in extra_paths]
    return out, errors


def load_root(root: Path, origin: str) -> tuple[list[Pack], list[PackError]]:
    """All valid packs under one root, and an error per invalid one. Two packs with the same id
    in one place are both refused: which one was meant is the author's call."""
    packs, errors = [], []
    for d in find_pack_dirs(root):
        try:
            packs.append(load_pack(d, origin))
        except PackError as e:
            errors.append(e)
    by_id: dict[str, list[Pack]] = {}
    for p in packs:
        by_id.setdefault(p.id, []).append(p)
    keep = []
    for p in packs:
        twins = by_id[p.id]
        if len(twins) > 1:
            others = ", ".join(str(t.path) for t in twins if t is not p)
            errors.append(PackError(p.toml_path, "id", f"duplicate id {p.id!r}: also in {others}; "
                                    "rename one of them", locate(p.toml_path.read_text(), "id")))
        else:
            keep.append(p)
    return keep, errors


def discover(extra_paths: Iterable[Path] = ()) -> Catalog:
    """Every pack a user can select. Sources, lowest precedence first: built-in packs/, installed
    packages' `warpsmith.packs` entry points, the user's config dir, ./.warpsmith/packs,
    $WARPSMITH_PACKS (os.pathsep-separated), then `extra_paths`. A later source's pack overrides an
    earlier one with the same id; the loser is kept in `shadowed`."""
    cat = Catalog()
    sources, cat.errors = pack_sources(extra_paths)
    seen_roots: set[Path] = set()
    seen_folders: set[Path] = set()
    broken_at: dict[str, tuple[int, PackError]] = {}
    for origin, root in sources:
        try:
            real = root.resolve()
        except OSError:
            continue
        if real in seen_roots or not root.exists():
            if origin in ("env", "path", "entrypoint") and not root.exists():
                cat.errors.append(PackError(root, "", f"pack folder not found ({origin}); "
                                            "fix the path or remove it"))
            continue
        seen_roots.add(real)
        packs, errors = load_root(root, origin)
        cat.errors += errors
        for e in errors:
            # A pack.toml too broken to name its id is taken to be the id of its folder.
            bid = e.pack_id or Path(e.path).parent.name
            if ID_RE.match(bid):
                broken_at[bid] = (ORIGINS.index(origin), e)
        for p in packs:
            folder = p.path.resolve()
            if folder in seen_folders:  # the same folder reached twice (a path inside another root)
                continue
            seen_folders.add(folder)
            if p.id in cat.packs:
                cat.shadowed.append(cat.packs[p.id])
            cat.packs[p.id] = p
    for bid, (rank, e) in broken_at.items():
        win = cat.packs.get(bid)
        if win is None or rank > ORIGINS.index(win.origin):
            cat.broken[bid] = e
    return cat


# -- selection ---------------------------------------------------------------------------------

def detect_gpu() -> tuple[str | None, str | None]:
    """(arch like 'sm_90' or 'gfx942', device name like 'NVIDIA H200') of GPU 0, or (None, None)
    without a GPU (harness/authoring/hardware.py's detect says how it knows)."""
    d = _detect()
    return d.arch, d.name


def detect_gpu_arch() -> str | None:
    return detect_gpu()[0]


@dataclass(frozen=True)
class HardwareChoice:
    """Which hardware pack a selection has for the GPU, and why: what the TUI notifies
    (harness.events.HardwarePackChosen). pack_id None: none was chosen; `reason` then says how to pick one."""

    pack_id: str | None
    reason: str  # the line a person reads


def choose_hardware(catalog: Catalog, arch: str | None = None, gpu_name: str | None = None,
                    detect: bool = True) -> HardwareChoice:
    """harness.authoring.hardware.match_hardware for this GPU (`arch=None` and `detect`: the GPU in this
    machine): the pack whose applies_to.arch has the GPU's target (sm_90, gfx942) and, when it lists
    applies_to.gpu, whose gpu names the device (H100 and H200 are both sm_90; an A30 is sm_80 but no A100)."""
    how = "given"
    if arch is None and detect:
        d = _detect()
        arch, gpu_name, how = d.arch, d.name, d.how
    hw_id, why = match_hardware(catalog.sorted(), arch, gpu_name)
    if hw_id:
        return HardwareChoice(hw_id, f"hardware {hw_id}: chosen for the detected GPU: {why} ({how})"
                              if how != "given" else f"hardware {hw_id}: {why}")
    if arch:
        return HardwareChoice(None, f"hardware: none chosen: {why}; pick one with --packs ID "
                                    f"(`{command('packs list')}`), or write one with "
                                    f"`{command('packs new hardware ID')}`")
    return HardwareChoice(None, f"hardware: none chosen ({how if how != 'given' else 'no GPU given'}); add one "
                                f"with --packs ID (`{command('packs list')}` shows the hardware packs)")


def task_packs(task: Any, catalog: Catalog, chosen: Iterable[str] = ()) -> tuple[list[str], list[str]]:
    """The model and rules packs a task gets by default, beside the `chosen` ones, and a note for each:
    - model packs the task names (task.toml `models`), and model packs whose applies_to.task
      names the task;
    - rules packs the task requires (task.toml `rules`), and rules packs whose applies_to names the
      task or the task's DSL.
    A pack id the task names but no source provides raises PackError naming the task file."""
    notes: list[str] = []
    ids: list[str] = []
    taken = set(chosen)
    toml_path = getattr(task, "toml_path", "task.toml")
    for fld, kind in (("models", "model"), ("rules", "rules")):
        for pid in getattr(task, fld, []) or []:
            if pid not in catalog.packs:
                known = ", ".join(p.id for p in catalog.sorted() if p.kind == kind) or "none"
                raise PackError(toml_path, fld, f"no {kind} pack {pid!r} (known {kind} packs: {known}); "
                                "install it or fix the id")
            if catalog.packs[pid].kind != kind:
                raise PackError(toml_path, fld, f"pack {pid!r} is a {catalog.packs[pid].kind} pack, "
                                f"not a {kind} pack")
            if pid not in taken and pid not in ids:
                ids.append(pid)
                notes.append(f"{kind} {pid}: named by the task")
    tname, dsl = getattr(task, "name", None), getattr(task, "dsl", None)
    for p in catalog.sorted():
        if p.kind == "hardware" or p.id in ids or p.id in taken:
            continue
        if tname and tname in p.applies_to.get("task", []):
            ids.append(p.id)
            notes.append(f"{p.kind} {p.id}: applies to task {tname}")
        elif p.kind == "rules" and dsl and dsl in p.applies_to.get("dsl", []) \
                and "task" not in p.applies_to:
            ids.append(p.id)
            notes.append(f"rules {p.id}: applies to DSL {dsl}")
    return ids, notes


def explain_default_selection(task: Any, catalog: Catalog, arch: str | None = None,
                              gpu_name: str | None = None, detect: bool = True
                              ) -> tuple[list[str], list[str]]:
    """The default pack ids for a task on this GPU, and notes saying why (or why not), the hardware
    pack's first: choose_hardware, then task_packs."""
    hw = choose_hardware(catalog, arch, gpu_name, detect)
    ids, notes = task_packs(task, catalog, [hw.pack_id] if hw.pack_id else [])
    return ([hw.pack_id] if hw.pack_id else []) + ids, [hw.reason, *notes]


def default_selection(task: Any, catalog: Catalog, arch: str | None = None,
                      gpu_name: str | None = None) -> list[str]:
    """Default pack ids for `task`; `arch=None` detects the GPU (see explain_default_selection)."""
    return explain_default_selection(task, catalog, arch, gpu_name)[0]


@dataclass
class Selection:
    """The packs a session uses, by id, in the order they were chosen. Saved in the session."""

    ids: list[str] = field(default_factory=list)

    FILE = "packs.json"

    def add(self, id: str, catalog: Catalog | None = None) -> None:
        if catalog is not None:
            catalog.get(id)  # KeyError naming the known ids
        if id not in self.ids:
            self.ids.append(id)

    def remove(self, id: str) -> None:
        if id not in self.ids:
            raise KeyError(f"pack {id!r} is not selected (selected: {', '.join(self.ids) or 'none'})")
        self.ids.remove(id)

    def apply(self, add: Iterable[str] = (), remove: Iterable[str] = (),
              catalog: Catalog | None = None) -> "Selection":
        for i in remove:
            self.remove(i)
        for i in add:
            self.add(i, catalog)
        return self

    def resolve(self, catalog: Catalog) -> list[Pack]:
        """The selected packs in prompt order (kind, then id), each the catalog's winner."""
        return sorted((catalog.get(i) for i in self.ids), key=lambda p: (KIND_ORDER[p.kind], p.id))

    def to_json(self) -> str:
        return json.dumps({"packs": self.ids})

    @classmethod
    def from_json(cls, s: str) -> "Selection":
        data = json.loads(s)
        ids = data.get("packs") if isinstance(data, dict) else data
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError("a pack selection is {\"packs\": [ids...]}")
        return cls(list(ids))

    def save(self, folder: Path) -> Path:
        p = Path(folder) / self.FILE
        tmp = p.with_suffix(".tmp")
        tmp.write_text(self.to_json() + "\n")
        os.replace(tmp, p)  # atomic: a crash never leaves half a selection
        return p

    @classmethod
    def load(cls, folder: Path) -> "Selection":
        p = Path(folder) / cls.FILE
        return cls.from_json(p.read_text()) if p.is_file() else cls()


def session_selection(task: Any, catalog: Catalog, add: Iterable[str] = (), remove: Iterable[str] = (),
                      saved: Selection | None = None, arch: str | None = None,
                      gpu_name: str | None = None) -> tuple[Selection, list[str], HardwareChoice | None]:
    """A session's packs: the saved selection when resuming, else the default for the task and
    GPU; then the user's --packs additions and --no-packs removals. Returns it, notes saying why
    each pack is in or out, and the hardware choice (its line is not among the notes; None when
    nothing chose one: a saved selection, with no hardware pack added). Unknown ids raise KeyError
    naming the known ones."""
    hardware: HardwareChoice | None = None
    if saved is not None:
        sel, notes = Selection(list(saved.ids)), ["packs: the session's saved selection"]
        missing = [i for i in sel.ids if i not in catalog.packs]
        if missing:
            raise KeyError(f"the session selected pack(s) {', '.join(missing)} that no source provides "
                           f"now (known: {', '.join(sorted(catalog.packs)) or 'none'}); reinstall them, "
                           f"or resume with --no-packs {','.join(missing)}")
    else:
        hardware = choose_hardware(catalog, arch, gpu_name)
        chosen = [hardware.pack_id] if hardware.pack_id else []
        ids, notes = task_packs(task, catalog, chosen)
        sel = Selection(chosen + ids)
    for r in remove:
        if r not in sel.ids:
            catalog.get(r)  # a typo is an error; a known but unselected pack is a no-op
            notes.append(f"--no-pack {r}: not selected anyway")
        else:
            sel.remove(r)
            if hardware is not None and hardware.pack_id == r:
                hardware = HardwareChoice(None, f"hardware: none chosen: {r} removed with --no-packs")
            else:
                notes.append(f"removed {r} (--no-pack)")
    for a in add:
        sel.add(a, catalog)
        if catalog.packs[a].kind == "hardware":
            # The person named the GPU's pack: it is the choice now; what detection chose (or why
            # it chose none) stays a note only while that pack is still selected.
            if hardware is not None and hardware.pack_id not in (None, a):
                notes.append(hardware.reason)
            hardware = HardwareChoice(a, f"hardware {a}: chosen with --packs")
        else:
            notes.append(f"added {a} (--pack)")
    return sel, notes, hardware


# -- live reload -------------------------------------------------------------------------------

def folder_fingerprint(folder: Path) -> str:
    """Hash of every regular file in a pack folder: cheap (packs are small), catches any edit."""
    parts = []
    try:
        for p in sorted(folder.rglob("*")):
            if p.is_file() and not p.is_symlink() and not any(s.startswith(".") for s in p.relative_to(folder).parts):
                try:
                    parts.append((str(p.relative_to(folder)), p.read_bytes()))
                except OSError:
                    continue
    except OSError:
        return "gone"
    return content_digest(parts) if parts else "gone"


class PackWatcher:
    """Watches the selected packs' folders; on a change re-validates the pack, keeps the last good
    version when the edit broke it, and calls `callback(pack_id, ok, message)` (from the watchdog
    thread, or the caller's thread in `refresh`). The loop turns the callback into PackReloaded.

    `packs()` re-checks fingerprints itself before answering, so an edit saved just before a prompt
    is used by that prompt even if the filesystem event hasn't arrived yet.
    """

    def __init__(self, packs: Iterable[Pack], callback: Callable[[str, bool, str], None] | None = None,
                 debounce_s: float = 0.15):
        self._lock = threading.RLock()
        self._packs: dict[str, Pack] = {}
        self._prints: dict[str, str] = {}
        self._callback = callback or (lambda i, ok, m: None)
        self._debounce = debounce_s
        self._observer: Any = None
        self._watches: dict[str, Any] = {}
        self._timers: dict[str, threading.Timer] = {}
        for p in packs:
            self._packs[p.id] = p
            self._prints[p.id] = folder_fingerprint(p.path)

    # The order packs were given in is kept; prompt order is decided by the renderer.
    def packs(self) -> list[Pack]:
        self.refresh()
        with self._lock:
            return list(self._packs.values())

    def get(self, id: str) -> Pack:
        with self._lock:
            return self._packs[id]

    def set_packs(self, packs: Iterable[Pack]) -> None:
        """Change the selection (the TUI picker): watch new folders, drop removed ones."""
        new = {p.id: p for p in packs}
        with self._lock:
            for pid in list(self._packs):
                if pid not in new:
                    self._unwatch(pid)
                    del self._packs[pid], self._prints[pid]
            for pid, p in new.items():
                if pid not in self._packs or self._packs[pid].path != p.path:
                    self._unwatch(pid)
                    self._packs[pid] = p
                    self._prints[pid] = folder_fingerprint(p.path)
                    self._watch(pid)

    def refresh(self, only: str | None = None) -> list[tuple[str, bool, str]]:
        """Re-validate packs whose files changed since last seen; returns (id, ok, message) per change."""
        changes = []
        with self._lock:
            ids = [only] if only else list(self._packs)
            for pid in ids:
                old = self._packs.get(pid)
                if old is None:
                    continue
                fp = folder_fingerprint(old.path)
                if fp == self._prints.get(pid):
                    continue
                self._prints[pid] = fp
                try:
                    new = load_pack(old.path, old.origin)
                    if new.id != pid:
                        raise PackError(new.toml_path, "id", f"changed from {pid!r} to {new.id!r} while "
                                        "selected; change it back or select the new id",
                                        locate(new.toml_path.read_text(), "id"))
                except PackError as e:
                    changes.append((pid, False, f"{e}; keeping the last good version "
                                    f"{old.version} #{old.sha256()[:8]}"))
                    continue
                except OSError as e:
                    changes.append((pid, False, f"{old.path}: {e}; keeping the last good version"))
                    continue
                if new.sha256() == old.sha256():
                    continue  # a touch, or a stray file that isn't part of the pack
                self._packs[pid] = new
                changes.append((pid, True, f"reloaded {pid} {new.version} #{new.sha256()[:8]} "
                                f"(was #{old.sha256()[:8]})"))
        for c in changes:
            try:
                self._callback(*c)
            except Exception:  # a UI callback failing must not stop reloads
                pass
        return changes

    def start(self) -> "PackWatcher":
        from watchdog.observers import Observer  # (~30 ms: only a run watches its packs)

        with self._lock:
            if self._observer is None:
                self._observer = Observer()
                self._observer.daemon = True
                for pid in self._packs:
                    self._watch(pid)
                self._observer.start()
        return self

    def stop(self) -> None:
        with self._lock:
            obs, self._observer = self._observer, None
            for t in self._timers.values():
                t.cancel()
            self._timers.clear()
            self._watches.clear()
        if obs is not None:
            obs.stop()
            obs.join(timeout=5)

    def __enter__(self) -> "PackWatcher":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def _watch(self, pid: str) -> None:
        if self._observer is None:
            return
        from watchdog.events import FileSystemEventHandler  # (as Observer, in start)

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                watcher._schedule(pid)

        try:
            self._watches[pid] = self._observer.schedule(Handler(), str(self._packs[pid].path), recursive=True)
        except OSError as e:  # folder removed: report once, keep the last good copy
            self._callback(pid, False, f"{self._packs[pid].path}: can't watch: {e}; keeping the last good version")

    def _unwatch(self, pid: str) -> None:
        w = self._watches.pop(pid, None)
        if w is not None and self._observer is not None:
            try:
                self._observer.unschedule(w)
            except (KeyError, ValueError):
                pass

    def _schedule(self, pid: str) -> None:
        # Editors save in bursts (temp file, rename, chmod): wait for the burst to end.
        with self._lock:
            t = self._timers.pop(pid, None)
            if t is not None:
                t.cancel()
            t = threading.Timer(self._debounce, self.refresh, kwargs={"only": pid})
            t.daemon = True
            self._timers[pid] = t
            t.start()

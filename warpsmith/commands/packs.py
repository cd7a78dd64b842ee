"""`warpsmith packs`: list, show, scaffold, validate, edit, export and import context packs.

Exit codes: 0 ok, 1 rejected/failed (invalid pack, refused import), 2 bad usage or input
(unknown id, missing file).

Export writes a gzip'd tar: `MANIFEST.json` (format, id, kind, version, the pack's sha256 and a
sha256 per file) and the pack under `<id>/`. Import trusts nothing in an archive: it refuses
absolute paths, `..`, links, device files and anything not listed in the manifest, checks every
hash, validates the pack, and only then moves it into place (refusing to overwrite unless --force).
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import io
import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from harness.authoring.packs import (KINDS, ID_RE, BrokenPackError, Catalog, Pack, PackError, discover,
                           explain_default_selection, find_pack_dirs, load_pack, project_packs_dir, user_packs_dir)

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from harness.authoring.hardware import ARCH_RE, SPECS, missing_specs, summary
from harness.invocation import command
from harness.authoring.tasks import TaskError, load_task

MANIFEST = "MANIFEST.json"
MANIFEST_FORMAT = 1
MAX_MEMBER_BYTES = 2_000_000
MAX_ARCHIVE_BYTES = 20_000_000
MAX_MEMBERS = 200


class ImportRefused(Exception):
    pass


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("packs", help="context packs: list, show, new, validate, edit, export, import",
                              description="Context packs: folders of markdown + pack.toml that go into "
                              "every prompt.")
    p.add_argument("--path", action="append", default=[], type=Path, metavar="DIR",
                   help="also look for packs in DIR (highest precedence; repeatable)")
    sub = p.add_subparsers(dest="packs_command", metavar="ACTION")

    s = sub.add_parser("list", help="every pack found: which one wins, its origin and path")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_list)

    s = sub.add_parser("show", help="render a pack's markdown and list its sources")
    s.add_argument("id", metavar="ID_OR_PATH")
    s.add_argument("--raw", action="store_true", help="print the markdown as is (no rendering)")
    s.set_defaults(func=cmd_show)

    s = sub.add_parser("new", help="scaffold a valid pack to fill in")
    s.add_argument("kind", choices=KINDS)
    s.add_argument("id")
    s.add_argument("--dir", type=Path, help="where to create it (default: the user's pack folder)")
    s.add_argument("--title", help="one-line title")
    s.add_argument("--arch", help="hardware: the GPU's compiler target, e.g. sm_89, sm_120a or gfx942 "
                   "(fills applies_to.arch and a [hardware] table to complete)")
    s.add_argument("--vendor", choices=("nvidia", "amd"), help="hardware: default from --arch (gfx* is amd)")
    s.set_defaults(func=cmd_new)

    s = sub.add_parser("validate", help="validate a pack by id, a pack folder, a pack.toml, or a folder of packs")
    s.add_argument("path", metavar="ID_OR_PATH")
    s.set_defaults(func=cmd_validate)

    s = sub.add_parser("edit", help="open a pack in $EDITOR, then validate it")
    s.add_argument("id", metavar="ID_OR_PATH")
    s.add_argument("file", nargs="?", help="which file (default: pack.toml and every listed file)")
    s.set_defaults(func=cmd_edit)

    s = sub.add_parser("export", help="write a pack to a .tar.gz with a manifest of hashes")
    s.add_argument("id", metavar="ID_OR_PATH")
    s.add_argument("-o", "--output", type=Path, required=True, metavar="FILE.tar.gz")
    s.set_defaults(func=cmd_export)

    s = sub.add_parser("import", help="install a pack from a .tar.gz or a folder, after checking it")
    s.add_argument("source", type=Path, metavar="FILE_OR_DIR")
    s.add_argument("--force", action="store_true", help="replace an installed pack with the same id")
    s.add_argument("--dir", type=Path, help="install into DIR (default: the user's pack folder)")
    s.set_defaults(func=cmd_import)

    s = sub.add_parser("default", help="the packs a session on TASK would start with, and why")
    s.add_argument("task")
    s.add_argument("--arch", help="compiler target, e.g. sm_90 or gfx942 (default: detect GPU 0)")
    s.add_argument("--gpu", help="device name, e.g. 'NVIDIA H200' (default: detect GPU 0)")
    s.set_defaults(func=cmd_default)

    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _err(msg: str) -> None:
    print(f"warpsmith packs: {msg}", file=sys.stderr)


def _short(path: Path) -> str:
    """A path as short as it can be and still be found: relative to here, or under ~."""
    for base, label in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            rel = path.resolve().relative_to(base.resolve())
            return f"{label}{rel}" if label else str(rel)
        except ValueError:
            continue
    return str(path)


def _catalog(args: argparse.Namespace) -> Catalog:
    return discover(getattr(args, "path", []) or [])


def _looks_like_path(ref: str) -> bool:
    # An id never has a slash; "./h200" or "my-packs/h200" or "pack.toml" means a folder on disk.
    return "/" in ref or os.sep in ref or ref.endswith(".toml") or ref in (".", "..")


def _get(args: argparse.Namespace, cat: Catalog) -> Pack | None:
    """The pack `args.id` names: a pack id from the catalog, or a pack folder / pack.toml path
    (a path wins when it exists; an id that is also a folder here is read as the folder)."""
    ref = args.id
    if _looks_like_path(ref) or (Path(ref) / "pack.toml").is_file():
        if not Path(ref).exists():
            _err(f"{ref}: no such file or folder")
            return None
        try:
            return load_pack(Path(ref))
        except PackError as e:
            _err(str(e))
            return None
    try:
        return cat.get(ref)
    except BrokenPackError as e:
        _err(f"{e}")
        fb = getattr(e, "fallback", None)
        # Only a pack that exists is offered as the way out.
        _err(f"pack {ref!r} above is broken and takes precedence over the {fb.origin} one in {_short(fb.path)}; "
             "fix the file, or remove it to use that one" if fb is not None else
             f"pack {ref!r} above is broken and no other copy of it exists; fix the file")
        return None
    except KeyError as e:
        _err(e.args[0] + f"; see `{command('packs list')}`, or give a pack folder")
        for err in cat.errors:
            if err.pack_id == ref:
                _err(f"a pack with that id was refused: {err}")
        return None


# -- list / show -------------------------------------------------------------------------------

def cmd_list(args: argparse.Namespace) -> int:
    cat = _catalog(args)
    if args.json:
        print(json.dumps({
            "packs": [dict(p.provenance(), kind=p.kind, title=p.title,
                           shadows=[s.provenance() for s in cat.shadows(p.id)]) for p in cat.sorted()],
            "errors": [str(e) for e in cat.errors],
            "broken": {i: str(e) for i, e in cat.broken.items()},
            "user_dir": str(user_packs_dir()), "project_dir": str(project_packs_dir())}, indent=2))
        return 0
    # rich (~30 ms): not at --help's start, nor for --json
    from rich.table import Table
    from rich.text import Text

    from harness.rich_console import command_console, print_wide

    con = command_console()  # piped: one line per row, paths never folded (harness/rich_console.py)
    table = Table(title="context packs (later origins override earlier: builtin < entrypoint < user "
                  "< project < env < --path)", title_justify="left")
    any_shadow = bool(cat.shadowed)
    for col in ("id", "kind", "version", "origin", "path") + (("shadows",) if any_shadow else ()):
        table.add_column(col, overflow="fold", no_wrap=col != "path" and col != "shadows")
    ncols = 5 + any_shadow
    rows = [(p.id, p) for p in cat.sorted()] + [(i, None) for i in sorted(set(cat.broken) - set(cat.packs))]
    for pid, p in rows:
        if p is not None:
            row = [Text(p.id), p.kind, p.version, p.origin, _short(p.path)]
            if any_shadow:
                row.append("\n".join(f"{s.origin}: {_short(s.path)}" for s in cat.shadows(p.id)))
        else:
            row = [Text(pid), "?", "?", "?", ""] + ([""] if any_shadow else [])
        if pid in cat.broken:
            # Said on the row itself: the copy that should win is broken, and this row is NOT used.
            e = cat.broken[pid]
            row[0] = Text(f"{pid} BROKEN", style="bold red")
            row[4] = Text(f"{e.path}" + (f":{e.line}" if e.line else ""), style="red")
            table.add_row(*row)
            table.add_row("", "", "", "", Text(
                f"{e.field + ': ' if e.field else ''}{e.problem}. A run selecting {pid} stops until this is "
                "fixed" + (f"; the {p.origin} copy above is not used instead" if p is not None else ""),
                style="red"), *[""] * (ncols - 5))
            continue
        table.add_row(*row)
    print_wide(con, table)
    if not cat.packs:
        con.print(f"no packs found; create one with `{command('packs new KIND ID')}`")
    for e in cat.errors:
        con.print(Text.assemble(("refused: ", "red"), str(e)), highlight=False)
    # Where a person's own packs go (`packs new` / `packs import` write to the first).
    con.print(f"your packs: {user_packs_dir()}\nthis project's packs: {_short(project_packs_dir())}",
              highlight=False, markup=False, soft_wrap=True)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    cat = _catalog(args)
    p = _get(args, cat)
    if p is None:
        return 2
    if args.raw:
        print(p.content())
        return 0
    # rich and its markdown (~45 ms): not at --help's start, nor for --raw
    from rich.console import Console
    from rich.markdown import Markdown
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    con = Console()
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column(overflow="fold")
    head.add_row("id", f"{p.id} ({p.kind})")
    head.add_row("version", p.version)
    head.add_row("origin", f"{p.origin}: {p.path}")
    head.add_row("sha256", p.sha256())
    if p.applies_to:
        head.add_row("applies to", "; ".join(f"{k}: {', '.join(v)}" for k, v in p.applies_to.items()))
    head.add_row("files", ", ".join(p.files) or "none")
    for s in cat.shadows(p.id):
        head.add_row("shadows", f"{s.origin}: {s.path}")
    con.print(Panel(head, title=p.title, title_align="left"))
    if p.kind == "hardware":
        hw = summary(p)
        con.print(Panel(Text(hw) if hw else Text("no [hardware] table: what this GPU has and lacks is not "
                                                 "stated in the harness's own words", style="yellow"),
                        title="device (as the prompt states it)", title_align="left"))
    if p.kind == "rules":
        rt = Table(title="never do (rules)", title_justify="left", show_lines=False)
        for col in ("rule", "detected by", "message"):
            rt.add_column(col, overflow="fold")
        for r in p.rule_specs():
            how = f"runtime: {r['runtime']}" if r.get("runtime") else "static query"
            rt.add_row(str(r.get("id")), how, str(r.get("message", "")).strip())
        con.print(rt)
    for name in p.files:
        con.rule(f"{p.id}/{name}")
        con.print(Markdown(p.file_text(name)))
    con.rule("sources")
    if p.sources:
        for i, s in enumerate(p.sources, 1):
            con.print(f"{i}. {s}", highlight=False, markup=False)
    else:
        con.print("none named")
    return 0


def cmd_default(args: argparse.Namespace) -> int:
    try:
        task = load_task(args.task, check_null=False)
    except TaskError as e:
        _err(str(e))
        return 2
    cat = _catalog(args)
    try:
        ids, notes = explain_default_selection(task, cat, args.arch, args.gpu, detect=args.arch is None)
    except PackError as e:
        _err(str(e))
        return 1
    print(" ".join(ids) if ids else "(no packs)")
    for n in notes:
        print(f"  {n}")
    return 0


# -- new / validate / edit ---------------------------------------------------------------------

SCAFFOLD_MD = {
    "hardware": "# {title}\n\n(Set applies_to.arch, e.g. [\"sm_90\", \"sm_90a\"] or [\"gfx942\"], and applies_to.gpu, "
                "words of the device name such as \"H200\" or \"MI300X\", in pack.toml so this pack is picked for "
                "that GPU; fill the [hardware] table (`packs new hardware ID --arch TARGET` writes one).)\n\n"
                "What a kernel writer must know about this GPU: compute capability, SM count, "
                "shared memory per SM and per block, L2, HBM size and bandwidth, which instructions it has "
                "and which it lacks. Name the source after each non-obvious fact (source: ...).\n",
    "model": "# {title}\n\nThe model's layers as a kernel writer needs them: shapes, dtypes, layouts, "
             "official names. Name the source after each non-obvious fact (source: ...).\n",
    "rules": "# {title}\n\nWhy these rules exist, and what to do instead.\n",
}
SCAFFOLD_RULE = """
# A rule: an id, the instruction the agent is told, and how it is detected, either a
# tree-sitter query on the candidate's source or the name of a runtime check:
# [[rule]]
# id = "no-example"
# message = "Never do the example thing; do this instead."
# query = "(call function: (identifier) @f (#eq? @f \\"example\\"))"
"""


def scaffold(kind: str, pid: str, dest: Path, title: str | None = None, arch: str | None = None,
             vendor: str | None = None) -> Path:
    import tomli_w  # (small): not at --help's start (commands/__init__.py)


    if not ID_RE.match(pid):
        raise ValueError(f"{pid!r} is not a valid pack id: lowercase letters, digits, '.', '_' or '-'")
    if arch is not None and (kind != "hardware" or not ARCH_RE.match(arch)):
        raise ValueError(f"--arch {arch!r}: " + ("only hardware packs have one" if kind != "hardware" else
                         "a compiler target like sm_89, sm_90a, sm_120a or gfx942"))
    vendor = vendor or (("amd" if arch.startswith("gfx") else "nvidia") if arch else None)
    if arch and (vendor == "amd") != arch.startswith("gfx"):
        raise ValueError(f"--arch {arch!r} is not a {vendor} target (NVIDIA: sm_XY, AMD: gfxNNN)")
    folder = dest / pid
    if folder.exists():
        raise FileExistsError(f"{folder} already exists; choose another id or --dir")
    title = title or f"{pid} ({kind} pack)"
    data: dict[str, Any] = {"id": pid, "kind": kind, "title": title, "version": "0.1.0"}
    if kind == "hardware":
        # Without --arch, empty on purpose: a placeholder arch would tie with the real pack for
        # that GPU and leave the default selection without a hardware pack.
        data["applies_to"] = {"arch": [arch] if arch else [], "gpu": []}
    data["files"] = ["overview.md"]
    data["sources"] = ["TODO: the document every fact here was checked against (URL, title, section)"]
    if kind == "hardware" and arch:
        amd = vendor == "amd"
        data["hardware"] = {
            "vendor": vendor, "arch": arch, "architecture": "TODO: e.g. " + ("CDNA 3" if amd else "Ada Lovelace"),
            "warp_size": 64 if amd else 32,  # AMD Instinct runs 64-wide wavefronts; check RDNA (wave32)
            "matrix_units": "TODO: e.g. " + ("MFMA matrix cores" if amd else "mma.sync tensor cores"),
            "matrix_dtypes": [],
            # Every feature you can vouch for, present or absent (known names: harness/authoring/hardware.py FEATURES).
            "features": [], "absent": [],
            "triton": "TODO: does Triton support this GPU, and how", "cute_dsl": "TODO: " + (
                "CuTe DSL is NVIDIA-only" if amd else "which CuTe DSL MMA operations run here")}
    folder.mkdir(parents=True)
    text = tomli_w.dumps(data)
    if kind == "rules":
        text += SCAFFOLD_RULE
    if kind == "hardware":
        text += scaffold_specs()
    (folder / "pack.toml").write_text(text)
    (folder / "overview.md").write_text(SCAFFOLD_MD[kind].format(title=title))
    return folder


def scaffold_specs() -> str:
    """A [specs] table naming every figure the harness reads, each commented out until it holds this
    GPU's value: a placeholder number would be read as one (a 0 KiB block limit fails every tuner
    config), and `packs validate` warns for each line still commented."""
    lines = ["", "[specs]",
             "# Every figure warpsmith reads (harness/authoring/hardware.py SPECS): uncomment each line with this GPU's",
             "# value and name its source in `sources`. `packs validate` warns for each one still missing",
             "# and says what reads it."]
    for name, f in SPECS.items():
        lines.append(f"# {name} = 0    # {f.means}")
    return "\n".join(lines) + "\n"


def _warnings(p: Pack) -> list[str]:
    out = []
    if any("TODO" in s for s in p.sources):
        out.append(f"{p.toml_path}: sources: still a TODO placeholder; name the real sources")
    hw = p.raw.get("hardware")
    if p.kind == "hardware" and not isinstance(hw, dict):
        out.append(f"{p.toml_path}: hardware: no [hardware] table, so prompts can't say what this GPU has and "
                   "lacks (see docs/packs.md)")
    elif isinstance(hw, dict):
        todo = [k for k, v in hw.items() if isinstance(v, str) and "TODO" in v]
        if todo:
            out.append(f"{p.toml_path}: hardware.{todo[0]}: still a TODO placeholder")
        if not hw.get("features") and not hw.get("absent"):
            out.append(f"{p.toml_path}: hardware.features/absent: both empty; list what the GPU has and lacks")
    if p.kind == "hardware":
        for name in missing_specs(p.raw):
            out.append(f"{p.toml_path}: specs.{name}: missing ({SPECS[name].means}); read by {SPECS[name].read_by}")
    if p.kind == "hardware" and not p.applies_to.get("arch"):
        out.append(f"{p.toml_path}: applies_to.arch: empty, so this pack is never selected by default; "
                   "set the compute capabilities it describes, e.g. [\"sm_90\", \"sm_90a\"]")
    return out


def cmd_new(args: argparse.Namespace) -> int:
    dest = args.dir or user_packs_dir()
    try:
        folder = scaffold(args.kind, args.id, dest, args.title, args.arch, args.vendor)
    except (ValueError, FileExistsError) as e:
        _err(str(e))
        return 2
    try:
        load_pack(folder)
    except PackError as e:  # the scaffold must always be valid; say so loudly if not
        _err(f"internal: the scaffold is invalid: {e}")
        return 1
    print(f"created {folder}")
    # By folder, not id: a pack made with --dir outside the searched folders has no id `packs edit` finds.
    where = shlex.quote(_short(folder))
    print(f"  edit: {command(f'packs edit {where}')}   (or any editor)   then: {command(f'packs validate {where}')}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    ref = str(args.path)
    path = Path(ref)
    if not path.exists() and not _looks_like_path(ref):
        # An id: validate the folder that id resolves to (the broken one, when it is broken).
        cat = _catalog(args)
        if ref in cat.broken:
            print(f"error: {cat.broken[ref]}")
            return 1
        if ref not in cat.packs:
            _err(f"{ref}: no such pack id, file or folder; see `{command('packs list')}`")
            return 2
        path = cat.packs[ref].path
    if not path.exists():
        _err(f"{path}: no such file or folder")
        return 2
    dirs = find_pack_dirs(path.parent if path.name == "pack.toml" else path)
    if not dirs:
        _err(f"{path}: no pack.toml found here or in its subfolders")
        return 2
    bad = 0
    ids: dict[str, Path] = {}
    for d in dirs:
        try:
            p = load_pack(d)
        except PackError as e:
            print(f"error: {e}")
            bad += 1
            continue
        if p.id in ids:
            print(f"error: {p.toml_path}: id: duplicate id {p.id!r}: also in {ids[p.id]}")
            bad += 1
            continue
        ids[p.id] = p.path
        for w in _warnings(p):
            print(f"warning: {w}")
        extra = f", {len(p.rules)} rules" if p.kind == "rules" else ""
        print(f"ok: {p.id} {p.version} ({p.kind}, {len(p.files)} files{extra}) {p.path}")
    return 1 if bad else 0


def cmd_edit(args: argparse.Namespace) -> int:
    cat = _catalog(args)
    p = None if args.id in cat.broken else _get(args, cat)
    if p is None:
        # An invalid pack is exactly what one wants to edit: find it through its error.
        paths = [Path(e.path).parent for e in cat.errors
                 if e.pack_id == args.id or (e is cat.broken.get(args.id))]
        if not paths:
            return 2
        folder = paths[-1]
        files = [folder / "pack.toml"]
    else:
        folder = p.path
        files = [p.toml_path] + [p.path / f for f in p.files]
    if args.file:
        files = [folder / args.file]
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    if p is not None and p.origin in ("builtin", "entrypoint"):
        print(f"note: editing the {p.origin} copy in {folder}; a user copy would survive upgrades "
              f"(export/import it, or `{command('packs new')}`)", file=sys.stderr)
    while True:
        try:
            rc = subprocess.call(shlex.split(editor) + [str(f) for f in files])
        except FileNotFoundError:
            _err(f"editor {editor!r} not found; set $EDITOR")
            return 2
        if rc != 0:
            _err(f"{editor} exited with {rc}; validating anyway")
        try:
            q = load_pack(folder)
        except PackError as e:
            print(f"error: {e}")
            if sys.stdin.isatty() and input("re-open the editor? [Y/n] ").strip().lower() in ("", "y", "yes"):
                continue
            return 1
        print(f"ok: {q.id} {q.version} #{q.sha256()[:12]}")
        return 0


# -- export / import ---------------------------------------------------------------------------

def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def manifest_for(p: Pack) -> dict[str, Any]:
    files = {"pack.toml": _sha(p.toml_path.read_bytes())}
    for f in p.files:
        files[f] = _sha((p.path / f).read_bytes())
    return {"format": MANIFEST_FORMAT, "id": p.id, "kind": p.kind, "version": p.version,
            "sha256": p.sha256(), "files": files}


def export_pack(p: Pack, out: Path) -> dict[str, Any]:
    """A reproducible archive: sorted members, zero mtimes and owners, so equal packs give equal bytes."""
    man = manifest_for(p)
    blobs = [(MANIFEST, (json.dumps(man, indent=2, sort_keys=True) + "\n").encode())]
    blobs += [(f"{p.id}/{name}", (p.path / name).read_bytes()) for name in man["files"]]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in blobs:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            tar.addfile(ti, io.BytesIO(data))
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())
    return man


def cmd_export(args: argparse.Namespace) -> int:
    cat = _catalog(args)
    p = _get(args, cat)
    if p is None:
        return 2
    man = export_pack(p, args.output)
    print(f"wrote {args.output}: {p.id} {p.version}, {len(man['files'])} files, sha256 {man['sha256']}")
    return 0


def _safe_member_name(name: str) -> PurePosixPath:
    if not name or name.startswith(("/", "\\")) or "\\" in name or (len(name) > 1 and name[1] == ":"):
        raise ImportRefused(f"archive member {name!r}: absolute path")
    pp = PurePosixPath(name)
    if any(part in ("..", "") for part in pp.parts) or pp.is_absolute():
        raise ImportRefused(f"archive member {name!r}: '..' would escape the target folder")
    return pp


def _read_archive(path: Path) -> dict[str, bytes]:
    """Every regular file of the archive by its name, after refusing anything dangerous."""
    try:
        tar = tarfile.open(path, mode="r:*")
    except tarfile.ReadError:
        # tarfile's own message lists every compression it tried, over several lines.
        raise ImportRefused(f"{path}: not a tar or tar.gz archive; give a file made by "
                            f"`{command('packs export')}` or a pack folder") from None
    except (tarfile.TarError, OSError) as e:
        raise ImportRefused(f"{path}: not a readable tar archive ({e})") from None
    out: dict[str, bytes] = {}
    total = 0
    with tar:
        members = tar.getmembers()
        if len(members) > MAX_MEMBERS:
            raise ImportRefused(f"{path}: {len(members)} members; a pack has at most {MAX_MEMBERS}")
        for m in members:
            pp = _safe_member_name(m.name)
            if m.issym() or m.islnk():
                raise ImportRefused(f"archive member {m.name!r}: links are not allowed in a pack")
            if m.isdir():
                continue
            if not m.isfile():
                raise ImportRefused(f"archive member {m.name!r}: not a regular file (device, fifo or other)")
            if m.size > MAX_MEMBER_BYTES:
                raise ImportRefused(f"archive member {m.name!r}: {m.size} bytes, over {MAX_MEMBER_BYTES}")
            total += m.size
            if total > MAX_ARCHIVE_BYTES:
                raise ImportRefused(f"{path}: more than {MAX_ARCHIVE_BYTES} bytes unpacked")
            # The stdlib's "data" filter repeats the checks above (absolute, .., links, devices);
            # both must agree before a byte is read.
            if hasattr(tarfile, "data_filter"):
                try:
                    tarfile.data_filter(m, "/nonexistent-dest")
                except tarfile.FilterError as e:
                    raise ImportRefused(f"archive member {m.name!r}: {e}") from None
            fh = tar.extractfile(m)
            if fh is None:
                raise ImportRefused(f"archive member {m.name!r}: unreadable")
            key = str(pp)
            if key in out:
                raise ImportRefused(f"archive member {m.name!r} appears twice")
            out[key] = fh.read()
    return out


def _read_folder(folder: Path) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        if any(s.startswith(".") for s in PurePosixPath(rel).parts):
            continue
        if p.is_symlink():
            raise ImportRefused(f"{p}: links are not allowed in a pack")
        if p.is_dir():
            continue
        if not p.is_file():
            raise ImportRefused(f"{p}: not a regular file")
        if p.stat().st_size > MAX_MEMBER_BYTES:
            raise ImportRefused(f"{p}: over {MAX_MEMBER_BYTES} bytes")
        out[rel] = p.read_bytes()
    return out


def _unpack_to_staging(blobs: dict[str, bytes], origin: str, staging: Path) -> Path:
    """Check the manifest against the files and write the pack into staging/<id>."""
    if MANIFEST in blobs:
        try:
            man = json.loads(blobs.pop(MANIFEST))
        except ValueError as e:
            raise ImportRefused(f"{origin}: {MANIFEST}: not JSON ({e})") from None
        if not isinstance(man, dict) or man.get("format") != MANIFEST_FORMAT or \
                not isinstance(man.get("files"), dict) or not ID_RE.match(str(man.get("id", ""))):
            raise ImportRefused(f"{origin}: {MANIFEST}: not a warpsmith pack manifest (format {MANIFEST_FORMAT})")
        pid = man["id"]
        want = {f"{pid}/{_safe_member_name(n)}": h for n, h in man["files"].items()}
        have = set(blobs)
        missing = sorted(set(want) - have)
        extra = sorted(have - set(want))
        if missing:
            raise ImportRefused(f"{origin}: {missing[0]} is in the manifest but not in the archive")
        if extra:
            raise ImportRefused(f"{origin}: {extra[0]} is not in the manifest; refusing unlisted files")
        for name, h in want.items():
            if _sha(blobs[name]) != h:
                raise ImportRefused(f"{origin}: {name}: sha256 {_sha(blobs[name])[:16]}... does not match "
                                    f"the manifest's {str(h)[:16]}...: the pack was altered after export")
        files = {name[len(pid) + 1:]: data for name, data in blobs.items()}
    else:
        # A plain folder (or an archive without manifest): one pack, optionally under one top folder.
        tops = {n.split("/", 1)[0] for n in blobs}
        if "pack.toml" in blobs:
            files = dict(blobs)
        elif len(tops) == 1 and f"{next(iter(tops))}/pack.toml" in blobs:
            top = next(iter(tops))
            files = {n[len(top) + 1:]: d for n, d in blobs.items()}
        else:
            raise ImportRefused(f"{origin}: no pack.toml (expected a pack folder or an exported archive)")
        man = None
    dest = staging / "pack"
    for name, data in files.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    if man is not None:
        try:
            p = load_pack(dest)
        except PackError as e:
            raise ImportRefused(f"{origin}: invalid pack: {e}") from None
        if p.id != man["id"]:
            raise ImportRefused(f"{origin}: the manifest says id {man['id']!r} but pack.toml says {p.id!r}")
        if p.sha256() != man.get("sha256"):
            raise ImportRefused(f"{origin}: pack sha256 {p.sha256()[:16]}... does not match the manifest")
    return dest


def import_pack(source: Path, dest_root: Path, force: bool = False) -> Pack:
    if source.is_dir():
        blobs = _read_folder(source)
    elif source.is_file():
        blobs = _read_archive(source)
    else:
        raise FileNotFoundError(f"{source}: no such file or folder")
    dest_root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".import-", dir=dest_root) as tmp:
        staged = _unpack_to_staging(blobs, str(source), Path(tmp))
        try:
            p = load_pack(staged)
        except PackError as e:
            raise ImportRefused(f"{source}: invalid pack, not installed: {e}") from None
        # Install only what the pack consists of: pack.toml and its listed files.
        keep = {"pack.toml", *p.files}
        for f in sorted(staged.rglob("*")):
            if f.is_file() and f.relative_to(staged).as_posix() not in keep:
                f.unlink()
        target = dest_root / p.id
        if target.exists() or target.is_symlink():
            if not force:
                raise ImportRefused(f"{target} already exists (pack {p.id}); use --force to replace it")
            old = Path(tmp) / "old"
            os.replace(target, old)  # moved aside first: a failure below leaves no half-installed pack
        os.replace(staged, target)
    return load_pack(target, "user")


def cmd_import(args: argparse.Namespace) -> int:
    dest = args.dir or user_packs_dir()
    try:
        p = import_pack(args.source, dest, args.force)
    except FileNotFoundError as e:
        _err(str(e))
        return 2
    except ImportRefused as e:
        _err(f"refused: {e}")
        return 1
    print(f"installed {p.id} {p.version} ({p.kind}) into {p.path} sha256 {p.sha256()}")
    return 0

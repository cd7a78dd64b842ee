"""`warpsmith report SESSION -o report.html [--format md]`."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from harness.sessions.session import Session, SessionError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a session's report (plots, outcomes, provenance, final diff)")
    p.add_argument("session", help="session id, `latest`, or a unique prefix or part of one, under ./.warpsmith/sessions")
    p.add_argument("-o", "--output", default=None, help="output file (default: report.html / report.md)")
    p.add_argument("--format", choices=["html", "md"], default=None,
                   help="html (one offline file, images embedded) or md (PNGs in <name>_files/); default from -o")
    p.set_defaults(func=cmd_report)


def cmd_report(args) -> int:
    fmt = args.format or ("md" if args.output and args.output.endswith(".md") else "html")
    suffix = Path(args.output).suffix.lower() if args.output else ""
    if suffix in (".md", ".html", ".htm") and suffix.lstrip(".")[:2] != fmt[:2]:
        # `-o r.md --format html` would write HTML into a .md file that no viewer then renders.
        print(f"warpsmith: -o {args.output} and --format {fmt} disagree; drop --format or change the name",
              file=sys.stderr)
        return 2
    out = Path(args.output or f"report.{fmt}")
    try:
        session = Session.open(args.session)
    except SessionError as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    try:
        import matplotlib  # noqa: F401 (a probe: only a report needs matplotlib, ~130 ms)
    except ImportError:
        print("warpsmith: report needs matplotlib (pip install matplotlib)", file=sys.stderr)
        return 2
    from harness.sessions.report import write_report  # ~12 ms: not at --help's start (commands/__init__.py)

    write_report(session, out, fmt)
    print(f"wrote {fmt} report of session {session.id} to {out}")
    return 0

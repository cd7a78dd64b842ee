"""`warpsmith sessions list | show ID | resume ID | export ID -o FILE`.

ID is a session's id, `latest`, or a unique prefix or part of one (harness.sessions.session.find_session)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.sessions.journal import results_rows
from harness.sessions.session import Session, SessionError, list_sessions, no_sessions_message

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from warpsmith.commands.run import check_agent_spec, check_pack_selection, open_tui, run_headless
from harness.evaluate.sandbox import from_cli
from harness.sessions.history import SessionHistory
from harness.invocation import command
from harness.authoring.packs import discover
from harness.authoring.tasks import load_task


ID_HELP = "a session id, `latest`, or a unique prefix or part of one (e.g. its tag: 3583)"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sessions", help="list, show, resume or export sessions in ./.warpsmith")
    ssub = p.add_subparsers(dest="sessions_cmd", metavar="ACTION")
    ssub.add_parser("list", help="sessions under ./.warpsmith/sessions").set_defaults(func=cmd_list)
    show = ssub.add_parser("show", help="a session's candidates: verdicts, decisions, who made them, veto reasons")
    show.add_argument("id", help=ID_HELP)
    show.set_defaults(func=cmd_show)
    resume = ssub.add_parser("resume", help="continue a session where it stopped")
    resume.add_argument("id", help=ID_HELP)
    resume.add_argument("--headless", action="store_true")
    resume.add_argument("--auto", action="store_true", default=None)
    # "--iterations 2" on a resume reads as "two more": that is what it means; --total is the other reading.
    more = resume.add_mutually_exclusive_group()
    more.add_argument("--iterations", type=int, default=None, metavar="N",
                      help="run N more iterations (default: up to the session's own limit)")
    more.add_argument("--total", type=int, default=None, metavar="N",
                      help="raise the session's limit to N iterations in all, counting those it ran")
    resume.add_argument("--quiet", action="store_true", default=None, help="headless: don't print the reasoning stream")
    resume.add_argument("--packs", default=None, metavar="ID,...",
                        help="add these packs to the session's selection (journalled)")
    resume.add_argument("--no-packs", default=None, metavar="ID,...",
                        help="take these packs out of the session's selection, e.g. one that no longer loads")
    resume.add_argument("--no-sandbox", action="store_true",
                        help=__import__("harness.evaluate.sandbox", fromlist=["x"]).NO_SANDBOX_HELP)
    resume.set_defaults(func=cmd_resume)
    export = ssub.add_parser("export", help="write the session's best kernel to a file (a dispatcher when it has "
                                            "per-bucket keeps)")
    export.add_argument("id", help=ID_HELP)
    export.add_argument("-o", "--output", required=True)
    export.set_defaults(func=cmd_export)
    p.set_defaults(func=cmd_list)


def _open(sid: str) -> Session | None:
    try:
        return Session.open(sid)
    except SessionError as e:  # unknown, unreadable, or a prefix of several ids (listed)
        print(f"warpsmith: {e}", file=sys.stderr)
        return None


def cmd_list(args) -> int:
    roots = list_sessions()
    if not roots:
        print(no_sessions_message())
        return 0
    for root in roots:
        try:
            s = Session.open(root.name)
        except SessionError as e:
            print(f"warpsmith: {e}", file=sys.stderr)
            continue
        rows = results_rows(s.journal.read())
        kept = sum(r["decision"].startswith("keep") for r in rows)
        print(f"{s.id:<40} {s.meta.task:<18} {s.meta.agent:<24} {len(rows)} decided, {kept} kept")
    return 0


def cmd_show(args) -> int:
    s = _open(args.id)
    if s is None:
        return 2
    from harness.sessions.session_view import print_show  # rich (~25 ms): not at --help's start (commands/__init__.py)

    print_show(s)
    return 0


def cmd_resume(args) -> int:
    # the loop and its parts (~40 ms): not at --help's start (commands/__init__.py)
    from harness.wiring import RunConfig


    s = _open(args.id)
    if s is None:
        return 2
    for flag, value in (("--iterations", args.iterations), ("--total", args.total)):
        if value is not None and value < 1:
            print(f"warpsmith: {flag} {value}: must be at least 1", file=sys.stderr)
            return 2
    problem = from_cli(getattr(args, "no_sandbox", False))
    if problem:
        print(f"warpsmith: {problem}", file=sys.stderr)
        return 2
    task = load_task(s.meta.task)  # (a TaskError: one line and exit 2, in cli.main)
    if args.packs:  # checked before the selection is journalled: a typo must not change the session

        catalog = discover()
        for pid in (x.strip() for x in args.packs.split(",") if x.strip()):
            try:
                catalog.get(pid)
            except KeyError as e:
                print(f"warpsmith: --packs: {str(e).strip(chr(34) + chr(39))}; see `{command('packs list')}`",
                      file=sys.stderr)
                return 2
    known = RunConfig.__dataclass_fields__
    cfg = RunConfig(**{k: v for k, v in s.meta.options.items() if k in known})
    if args.auto is not None:
        cfg.auto = args.auto
    history = SessionHistory.of(s)
    if args.iterations is not None:
        cfg.iterations = history.started + args.iterations
    elif args.total is not None:
        cfg.iterations = args.total
    if args.quiet is not None:
        cfg.quiet = args.quiet

    problem = check_agent_spec(cfg.agent)  # no key, no server: said now, not at the first proposal
    if problem:
        print(f"warpsmith: session {s.id}'s agent: {problem}", file=sys.stderr)
        return 2
    if args.packs or args.no_packs:
        change_packs(s, args.packs, args.no_packs)

    problem = check_pack_selection(task, cfg, s)  # a broken pack stops the TUI here too, not in its thread
    if problem:
        print(f"warpsmith: {problem}", file=sys.stderr)
        return 2
    from harness.sessions.summary import resume_command  # (small): not at --help's start (commands/__init__.py)

    done = iterations_already_run(s, cfg.iterations)
    if done is not None:
        ran = f"its {done} iterations" if args.total is None else f"{done} iterations, as many as --total {args.total}"
        print(f"session {s.id} already ran {ran}; to run 10 more: {resume_command(s.id, args.headless, 10)}")
        return 0
    print(resume_plan(s.id, history, cfg.iterations, args.iterations), file=sys.stderr, flush=True)
    if not args.headless:
        return open_tui(task, cfg, s.id)
    return run_headless(s, task, cfg, resumed=True)


def resume_plan(sid: str, history: SessionHistory, limit: int, more: int | None) -> str:
    """What a resume is about to do, said before it does it: how many iterations, up to which one, and
    which undecided candidate is asked about first (`--iterations N` is N more, never a new total)."""
    started = history.started
    left = max(0, limit - started)
    how = f"{more} more iteration{'' if more == 1 else 's'}" if more is not None else \
        f"up to its limit of {limit} iterations ({left} more)"
    again = [f"#{st.iteration}" for st in history.undecided()]
    ask = f"; first asks again about {', '.join(again)}" if again else ""
    return f"resuming {sid}: {how}, to #{limit} ({started} started before){ask}"


def change_packs(s: Session, add: str | None, remove: str | None) -> None:
    """Edit the session's pack selection before it resumes (a journalled PacksSelected, as the
    TUI's picker does). Removing needs no catalog: it is how a pack that no longer loads leaves.
    An added id is checked when the loop starts, like --packs on run."""
    split = lambda v: [x.strip() for x in (v or "").split(",") if x.strip()]
    ids = s.journalled_packs()
    if ids is None:  # a session from before selections were journalled
        legacy = s.legacy_packs()
        ids = legacy if legacy is not None else list(s.meta.packs)
    gone = set(split(remove))
    new = [i for i in ids if i not in gone] + [i for i in split(add) if i not in ids]
    if new != ids:
        s.set_packs(new)
        print(f"packs: {', '.join(new) or 'none'}")


def iterations_already_run(s: Session, limit: int) -> int | None:
    """How many iterations the session has started, when resuming it under `limit` would do
    nothing (the loop would end at once with 'iterations done'), else None: every started iteration
    is decided, none is left under the limit, and no keep is left half-done by a kill."""
    h = SessionHistory.of(s)
    started, last_keep = h.started, h.last_keep
    if started < limit or h.undecided():
        return None
    if last_keep and last_keep.get("best") == last_keep.get("commit") and s.workspace.best != last_keep.get("commit"):
        return None  # a keep journalled before a kill: the loop finishes it on resume
    return started


def cmd_export(args) -> int:
    s = _open(args.id)
    if s is None:
        return 2
    # With per-bucket keeps, export_session writes a dispatcher; else the best kernel (harness/model/dispatch.py).
    from harness.model.dispatch import export_session  # ~15 ms: not at --help's start (commands/__init__.py)

    out = Path(args.output)
    if not out.parent.is_dir():
        print(f"warpsmith: -o {out}: no such folder {out.parent}", file=sys.stderr)
        return 2
    if out.is_dir():
        print(f"warpsmith: -o {out}: is a folder; give a file name (e.g. {out / 'best_kernel.py'})", file=sys.stderr)
        return 2
    ws = s.workspace
    if not ws.ever_kept():
        out.write_text(ws.source(ws.baseline))
        print(f"nothing was kept in this session: wrote the baseline (commit {ws.baseline[:10]}) to {out}")
        return 0
    return export_session(s, out)

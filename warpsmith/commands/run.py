"""`warpsmith run TASK`: the autoresearch loop, headless or in the TUI."""
from __future__ import annotations

import argparse
import sys

from harness.authoring.tasks import load_task

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from harness import events as ev
from harness.evaluate.sandbox import from_cli
from harness.sessions.history import SessionHistory
from harness.invocation import command
from harness.authoring.packs import PackError, discover


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run the autoresearch loop on a task")
    p.add_argument("task", nargs="?", default="softmax", help="task name or folder (default: softmax)")
    add_loop_options(p)
    p.set_defaults(func=cmd_run)


# One meaning for `run --timeout` and `eval --timeout` (harness.authoring.tasks: call_timeout_s).
TIMEOUT_HELP = ("limit for one call of the candidate on one shape (default: the task's call_timeout_s, "
                "120 s, on a GPU; its interpreter_call_timeout_s, 300 s, in Triton's interpreter); "
                "a call that runs longer is killed and the candidate rejected")


def check_timeout(value: float | None) -> str | None:
    if value is not None and not (0 < value <= 86400):  # (also refuses nan)
        return f"--timeout {value:g}: must be a number of seconds above 0 (at most 86400)"
    return None


def add_loop_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--agent", default="tuner",
                   help="tuner | script:DIR | anthropic:MODEL | openai:MODEL | openai-compat:URL[#MODEL]")
    p.add_argument("--iterations", type=int, default=20, help="stop after this many proposals")
    p.add_argument("--headless", action="store_true", help="print events instead of opening the TUI")
    p.add_argument("--auto", action="store_true", help="follow the harness's recommendation (no prompt)")
    p.add_argument("--packs", default="", help="comma-separated pack ids to add to the default selection")
    p.add_argument("--no-packs", default="", help="comma-separated pack ids to remove from the selection")
    p.add_argument("--idea", action="append", default=[], help="a standing direction for the agent")
    p.add_argument("--eval", dest="eval_backend", default="local", help="local | pool | ray[:ADDRESS]")
    p.add_argument("--proposals", type=int, default=1, help="proposals in flight at once")
    p.add_argument("--budget-usd", type=float, default=None, help="stop proposing once spent")
    p.add_argument("--no-mouse", action="store_true", help="TUI: leave the mouse to the terminal")
    p.add_argument("--quiet", action="store_true", help="headless: don't print the reasoning stream")
    p.add_argument("--no-sandbox", action="store_true", help=__import__("harness.evaluate.sandbox", fromlist=["x"]).NO_SANDBOX_HELP)
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help=TIMEOUT_HELP)
    p.add_argument("--keep-buckets", choices=["off", "auto"], default="off",
                   help="auto: keep a candidate that loses overall for the task's [[buckets]] where it wins")


def check_agent_spec(spec: str) -> str | None:
    """What stops the agent from starting, or None: its form, a script folder, the API key (naming
    the variable and the config file's section), a local server that doesn't answer. Checked
    before a session folder exists, so a refused run leaves nothing behind (harness/agents/preflight.py)."""
    from harness.agents.preflight import agent_problem  # httpx2 (~50 ms): not at --help's start (commands/__init__.py)

    return agent_problem(spec)


def check_eval_backend(spec: str) -> str | None:
    """The --eval spec's form (the backend itself starts later, inside the session)."""
    name, _, arg = spec.partition(":")
    if name == "local" and not arg or name == "ray":
        return None
    if name == "pool" and (not arg or (arg.isdigit() and int(arg) >= 1)):
        return None
    return f"--eval {spec!r}: use local | pool[:N] | ray[:ADDRESS] (N a positive integer)"


def check_pack_ids(cfg) -> str | None:
    """Every id in --packs / --no-packs names a pack that exists: a typo is refused up front."""
    catalog = discover()
    for flag, ids in (("--packs", cfg.packs_add), ("--no-packs", cfg.packs_remove)):
        for pid in ids:
            try:
                catalog.get(pid)
            except PackError as e:  # the copy that would win is broken: its file and line
                return f"{flag} {pid}: {e}"
            except KeyError as e:
                return f"{flag}: {str(e).strip(chr(34) + chr(39))}; see `{command('packs list')}`"
    return None


def check_pack_selection(task, cfg, session=None) -> str | None:
    """The packs the run would start with all load: a broken pack of a selected id (a user's copy
    shadowing a built-in) stops the run here, TUI or headless, before any session folder exists."""
    # the loop and its parts (~40 ms): not at --help's start (commands/__init__.py)
    from harness.wiring import resolve_packs

    try:
        resolve_packs(task, cfg, session)
    except ValueError as e:
        return str(e)
    return None


def cmd_run(args: argparse.Namespace) -> int:
    task = load_task(args.task)  # (a TaskError: one line and exit 2, in cli.main)
    for flag, value in (("--iterations", args.iterations), ("--proposals", args.proposals)):
        if value < 1:
            print(f"warpsmith: {flag} {value}: must be at least 1", file=sys.stderr)
            return 2
    if args.budget_usd is not None and not args.budget_usd > 0:  # (also refuses nan)
        print(f"warpsmith: --budget-usd {args.budget_usd:g}: must be more than 0 dollars", file=sys.stderr)
        return 2
    problem = check_timeout(args.timeout) or check_agent_spec(args.agent)  # (load_task has checked kernel.py and its entry)
    if problem:
        print(f"warpsmith: {problem}", file=sys.stderr)
        return 2
    # ~40 ms: not at --help's start (commands/__init__.py)
    from harness.wiring import RunConfig, make_agent, start_session

    problem = from_cli(getattr(args, "no_sandbox", False))
    if problem:
        print(f"warpsmith: {problem}", file=sys.stderr)
        return 2
    cfg = RunConfig.from_args(args)
    from harness.authoring.dsl_support import run_problem  # (small): not at --help's start (commands/__init__.py)

    for check in (lambda: check_eval_backend(cfg.eval_backend), lambda: check_pack_ids(cfg),
                  lambda: check_pack_selection(task, cfg), lambda: run_problem(task, cfg.eval_backend)):
        problem = check()
        if problem:  # before start_session: a refused run leaves no session folder behind
            print(f"warpsmith: {problem}", file=sys.stderr)
            return 2
    try:
        make_agent(cfg.agent)  # a bad spec or missing key fails here, before a session folder exists
    except (ValueError, FileNotFoundError) as e:
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    if not args.headless:
        return open_tui(task, cfg, None)
    session = start_session(task, cfg)
    return run_headless(session, task, cfg)


def run_headless(session, task, cfg, resumed: bool = False) -> int:
    from harness.headless import Printer  # the loop, rich (~25 ms): not at --help's start (commands/__init__.py)

    printer = Printer(show_reasoning=not cfg.quiet)
    if resumed:  # an undecided candidate is asked about again: its diff and verdict are in the journal
        # (a record from an older warpsmith that isn't an event any more: its diff just isn't shown again)
        for e in SessionHistory.of(session).events():
            if isinstance(e, (ev.CandidateProposed, ev.EvalResult)):
                printer.remember(e)
    if not cfg.auto and not sys.stdin.isatty():
        # Answers then come from a pipe or nothing at all; at its end each prompt takes its default.
        print("warpsmith: stdin is not a terminal: keep/revert answers are read from it, and once it ends "
              "every candidate gets the default answer; pass --auto for an unattended run", file=sys.stderr)
    try:
        try:
            loop = headless_loop(session, task, cfg, printer, resumed)
        except ValueError as e:
            print(f"warpsmith: {e}", file=sys.stderr)
            return 2
        loop.run()
    except KeyboardInterrupt:
        # Everything decided so far is in the journal (fsync'd per event); an undecided candidate
        # is asked about again on resume. Say how, on the line a person reads last.
        from harness.sessions.summary import resume_command  # (small): not at --help's start (commands/__init__.py)

        print_summary(session, None)
        print(f"\ninterrupted; resume: {resume_command(session.id)}", file=sys.stderr)
        return 130
    print_summary(session, printer.ended)
    return 0


def headless_loop(session, task, cfg, printer, resumed: bool = False):
    """The headless front end's loop: its decider (stdin, or --auto) and its printer, given to the
    one assembly path (harness.wiring.build_loop) the TUI uses too."""
    # the loop and its parts (~40 ms): not at --help's start (commands/__init__.py)
    from harness.headless import StdinDecider
    from harness.loop import AutoDecider
    from harness.wiring import build_loop

    repo = getattr(getattr(session, "workspace", None), "root", None)  # for the full-diff command
    decider = AutoDecider() if cfg.auto else StdinDecider(task=task, proposals=printer.proposals, repo=repo)
    return build_loop(session, task, cfg, decider, printer, resumed=resumed)


def print_summary(session, ended) -> None:
    from harness.sessions.summary import summary_lines  # (small): not at --help's start (commands/__init__.py)

    print("\n" + "\n".join(summary_lines(session, ended)), flush=True)


def open_tui(task, cfg, session_id: str | None) -> int:
    try:
        from tui.app import run_app  # textual and the app (~0.4 s): only when the TUI opens
    except ImportError as e:  # the TUI is optional at import time only if textual is missing
        print(f"warpsmith: the TUI could not start ({e}); use --headless", file=sys.stderr)
        return 2
    return run_app(task=task, cfg=cfg, session_id=session_id)


def open_tui_home() -> int:
    """Bare `warpsmith`: the TUI on the default task."""
    from harness.wiring import RunConfig  # ~40 ms, which the TUI about to open needs anyway: not at --help's start

    args = argparse.Namespace(task="softmax")
    p = argparse.ArgumentParser()
    add_loop_options(p)
    args = p.parse_args([], namespace=args)
    return open_tui(load_task("softmax"), RunConfig.from_args(args), None)

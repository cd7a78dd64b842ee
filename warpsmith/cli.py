"""warpsmith's command line. Each subcommand lives in warpsmith/commands/<name>.py and exposes
`register(subparsers)`; modules are discovered, so a feature adds its command without editing here.
"""
from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

import warpsmith.commands
from harness.authoring.tasks import TaskError
from harness.invocation import prog


class OneLineParser(argparse.ArgumentParser):
    """A bad flag or value is one line naming it (argparse's default prints the whole usage
    first), exit status 2. Subcommands' parsers are of this class too (add_subparsers' default)."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (`{self.prog} -h` lists the options)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog=prog(),  # usage lines and `PROG CMD -h` hints as the user invoked it (harness/invocation.py)
        description="An agent proposes GPU kernels; warpsmith checks, times, and a person keeps or reverts.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(warpsmith.commands.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"warpsmith.commands.{info.name}")
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        # Bare `warpsmith` opens the TUI when it is installed, else prints help.
        run = getattr(args, "_default", None)
        if run is None:
            from warpsmith.commands.run import open_tui_home  # (loaded already, like every command module)

            try:
                return open_tui_home()
            except ImportError as e:  # the TUI's packages missing (a bare GPU box): say so, then help
                print(f"warpsmith: the TUI can't start ({e}); run a command instead:", file=sys.stderr)
                parser.print_help()
                return 2
    try:
        return int(args.func(args) or 0)
    except TaskError as e:  # a task that doesn't load, for any command: one line naming it, exit 2
        print(f"warpsmith: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `warpsmith ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())

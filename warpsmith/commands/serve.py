"""`warpsmith serve [-- ARGS]`: the TUI in a browser, through textual-serve.

For a laptop's browser over an SSH tunnel: the server binds 127.0.0.1 by default and prints the
`ssh -L` line to reach it. textual-serve starts `warpsmith ARGS` (default `run softmax`) in a
pseudo-terminal for every browser connection and relays it over a websocket: the same app, the
same keys. It has no login of its own, so anything that can reach the port can keep and revert;
that is why it binds the loopback unless told otherwise.
"""
from __future__ import annotations

import argparse
import os
import shlex
import socket
import sys

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from harness.invocation import PROG_ENV, prog
from harness.authoring.tasks import TaskError, load_task

DEFAULT_PORT = 8000
TUI_COMMANDS = ("run", "sessions resume")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="run the TUI in a browser (textual-serve), e.g. over an SSH tunnel",
                       description="Serve `warpsmith ARGS` (default: run softmax) to a browser. Every browser "
                                   "tab starts the app anew; a run's session is kept on disk either way "
                                   "(sessions resume ID).")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind (default 127.0.0.1: reach it through ssh -L; there is no login)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("args", nargs=argparse.REMAINDER,
                   help="what to serve, after --: run TASK [options] or sessions resume ID (default: run softmax)")
    p.set_defaults(func=cmd_serve)


def served_args(args: list[str]) -> tuple[list[str] | None, str | None]:
    """The warpsmith arguments to serve, or the one line saying why they can't be."""
    args = list(args)
    if args[:1] == ["--"]:
        args = args[1:]
    if not args:
        return ["run", "softmax"], None
    if not (args[0] == "run" or args[:2] == ["sessions", "resume"]):
        return None, f"serve: {shlex.join(args)}: serves the TUI only: run TASK [options] or sessions resume ID"
    if "--headless" in args:
        return None, "serve: --headless prints to a terminal; a browser needs the TUI (drop --headless)"
    if args[0] == "run":
        task = next((a for a in args[1:] if not a.startswith("-")), "softmax")
        try:
            load_task(task)
        except TaskError as e:  # before serving: a typo is said once here, not in every browser tab
            return None, f"serve: {e}"
    return args, None


def served_command(args: list[str]) -> str:
    # The same interpreter as this process: the venv's warpsmith, whatever is on PATH.
    return shlex.join([sys.executable, "-m", "warpsmith", *args])


def tunnel_hint(host: str, port: int) -> str:
    url = f"http://{host}:{port}"
    lines = [f"warpsmith serve: {url}"]
    if host in ("127.0.0.1", "localhost", "::1"):
        lines.append(f"from a laptop: ssh -N -L {port}:127.0.0.1:{port} {socket.gethostname()}   "
                     f"then open http://127.0.0.1:{port} (keep the same port number on both ends: "
                     "the page names it)")
    else:
        lines.append(f"bound to {host}: anyone who can reach this port can keep and revert (there is no login)")
    return "\n".join(lines)


def port_problem(host: str, port: int) -> str | None:
    """A port that can't be bound, said before textual-serve prints its banner and fails."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        return f"serve: cannot listen on {host}:{port}: {e.strerror or e} (choose another with --port)"
    return None


def cmd_serve(args) -> int:
    served, why = served_args(args.args)
    if served is None:
        print(f"warpsmith: {why}", file=sys.stderr)
        return 2
    if not 0 < args.port < 65536:
        print(f"warpsmith: serve: --port {args.port}: use 1-65535", file=sys.stderr)
        return 2
    problem = port_problem(args.host, args.port)
    if problem:
        print(f"warpsmith: {problem}", file=sys.stderr)
        return 2
    try:  # textual-serve (~180 ms): not at --help's start, and optional
        from textual_serve.server import Server
    except ImportError:
        print("warpsmith: serve needs textual-serve: .venv/bin/pip install textual-serve", file=sys.stderr)
        return 2
    print(tunnel_hint(args.host, args.port), flush=True)
    # The TUI runs as `python -m warpsmith` under textual-serve; the commands it prints (its exit line,
    # the sessions screen) name warpsmith the way the user ran `serve`.
    os.environ.setdefault(PROG_ENV, prog())
    Server(served_command(served), host=args.host, port=args.port, title="warpsmith").serve()
    return 0

"""Can an agent spec start? One line saying what to fix, or None; asked before a run starts
(`warpsmith run --agent`) and before the TUI's `m` accepts a switch.

Cheap on purpose: no provider SDK is imported and no request is sent (the SDKs take seconds to
import; a request costs money). What it checks is what would otherwise surface only at the first
proposal: the spec's form, a script folder, the API key (environment or config file, named with its
`[section]`), and whether anything listens at a local OpenAI-compatible server's address.
"""
from __future__ import annotations

import ipaddress
import socket
from pathlib import Path
from urllib.parse import urlparse

from harness.agents.config import AgentConfigError, provider_config, resolve_key
from harness.agents.registry import parse_spec

KEY_ENV = {"anthropic": ("ANTHROPIC_API_KEY",), "openai": ("OPENAI_API_KEY",)}
CONNECT_TIMEOUT_S = 1.0


def agent_problem(spec: str, connect_timeout_s: float = CONNECT_TIMEOUT_S) -> str | None:
    """What stops `spec` from starting, in one line naming what to set or fix; None when it can start."""
    try:
        kind, rest = parse_spec(spec)
        if kind == "script":
            return _script_problem(spec, Path(rest).expanduser())
        if kind in KEY_ENV:
            # Raises with the variable, the config file and its [section] when neither has a key.
            resolve_key(kind, KEY_ENV[kind], provider_config(kind))
        elif kind == "openai-compat":
            provider_config(kind)  # a broken config file is named now, not at the first proposal
            return _server_problem(spec, rest.partition("#")[0], connect_timeout_s)
    except AgentConfigError as e:
        return str(e)
    return None


def _script_problem(spec: str, folder: Path) -> str | None:
    # A folder that doesn't exist would otherwise start a session that replays nothing.
    if not folder.is_dir():
        return f"--agent {spec!r}: {folder}: no such folder (script:DIR replays DIR/*.py)"
    if not any(folder.glob("*.py")):
        return f"--agent {spec!r}: {folder} has no .py files to replay"
    return None


def _is_local(host: str) -> bool:
    """Loopback, a private network or a .local/.localhost name: a server the person runs, reached
    directly. A public host may sit behind a proxy the SDK would use, so it is left to the first request."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private or ip.is_link_local


def _server_problem(spec: str, url: str, timeout_s: float) -> str | None:
    p = urlparse(url)
    if p.scheme not in ("http", "https") or not p.hostname:
        return (f"--agent {spec!r}: {url!r} is not an http(s) URL; use e.g. "
                "openai-compat:http://127.0.0.1:8000#MODEL")
    try:
        port = p.port or (443 if p.scheme == "https" else 80)
    except ValueError:  # a port that isn't a number, or out of range
        return f"--agent {spec!r}: {url!r} has a bad port"
    if not _is_local(p.hostname):
        return None
    try:
        # A TCP connect only: it says something listens, not that it speaks the API (the first
        # proposal finds that out, with the server's own error).
        socket.create_connection((p.hostname, port), timeout=timeout_s).close()
    except OSError as e:
        why = "timed out" if isinstance(e, TimeoutError) else (e.strerror or type(e).__name__).lower()
        return (f"--agent {spec!r}: nothing answers at {p.hostname}:{port} ({why}); start the server "
                "(vLLM, SGLang, Ollama, llama.cpp) or fix the URL")
    return None

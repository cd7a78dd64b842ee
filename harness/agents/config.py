"""The user's config file (config.toml) and the API keys: where they are read from, the one-line error a
person must act on before an agent can start, and keeping keys out of anything written down.

Cheap to import on purpose (no HTTP client, no SDK): preflight and `warpsmith agents` read keys here
before any provider module is loaded.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Mapping

from harness.authoring.paths import config_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class AgentConfigError(ValueError):
    """A spec, key or config file the user must fix before an agent can start. str() is one line."""


def config_path() -> Path:
    return config_dir() / "config.toml"


def read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as e:
        raise AgentConfigError(f"{path}: bad TOML: {e}; fix or delete the file") from None


def load_config(path: Path | None = None) -> dict:
    return read_toml(path or config_path())


def provider_config(provider: str, path: Path | None = None) -> dict:
    """The `[provider]` table of config.toml ({} when absent); checks that it is a table."""
    cfg = load_config(path)
    section = cfg.get(provider, {})
    if not isinstance(section, dict):
        raise AgentConfigError(f"{path or config_path()}: [{provider}] must be a table")
    return section


def resolve_key(provider: str, env_names: tuple[str, ...], section: Mapping[str, Any],
                required: bool = True) -> str | None:
    """A key from the environment first, else config.toml. The message names both places."""
    for name in env_names:
        value = os.environ.get(name)
        if value:
            return value
    value = section.get("api_key")
    if isinstance(value, str) and value:
        return value
    if required:
        envs = " or ".join(env_names)
        raise AgentConfigError(
            f"{provider}: no API key: set {envs}, or api_key in [{provider}] of {config_path()}")
    return None


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s and len(s) >= 8:
            text = text.replace(s, "[redacted]")
    return text

"""The user's config folder, in one place: config.toml, prices.toml and packs/ all live there."""
from __future__ import annotations

import os
from pathlib import Path

APP_NAME = "warpsmith"


def config_dir() -> Path:
    """WARPSMITH_CONFIG_DIR if set, else the platform's config folder (platformdirs: on Linux
    $XDG_CONFIG_HOME/warpsmith or ~/.config/warpsmith)."""
    override = os.environ.get("WARPSMITH_CONFIG_DIR")
    if override:
        return Path(override)
    import platformdirs  # imported late: most commands never need it

    return Path(platformdirs.user_config_dir(APP_NAME))


def user_packs_dir() -> Path:
    return config_dir() / "packs"

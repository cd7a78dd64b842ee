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


# A wheel ships the checkout's top-level kernels/ and packs/ inside the harness package (setup.py
# maps them there); a checkout or an editable install reads them where people edit them.
_INSTALLED_DATA = Path(__file__).resolve().parents[1] / "_builtin"
_CHECKOUT = Path(__file__).resolve().parents[2]


def builtin_dir(name: str) -> Path:
    """The built-in `kernels` or `packs` folder: inside an installed wheel, else the checkout's."""
    installed = _INSTALLED_DATA / name
    return installed if installed.is_dir() else _CHECKOUT / name


def user_packs_dir() -> Path:
    return config_dir() / "packs"

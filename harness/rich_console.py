"""The Rich console a command prints through, configured for where its output goes.

On a terminal Rich fits everything to the terminal's width. Piped or redirected there is no width:
Rich assumes 80 columns (or $COLUMNS), wraps long lines there, and a table wider than that gets its
columns squeezed until words fold mid-way (`too many / rows per / program f`) and its last column is
cropped. A file is read with a pager or grep, where a long line costs nothing and a broken word is
lost: so when the output is not a terminal nothing is wrapped (soft_wrap) and a table is printed at
its natural width, one line per row.
"""
from __future__ import annotations

from typing import Any

from rich.console import Console, RenderableType
from rich.measure import Measurement

UNBOUNDED = 10_000  # columns to measure a table's natural width against (its widest row, unwrapped)


def command_console(**kw: Any) -> Console:
    """A console for a command's output (highlight off: file names and numbers stay plain text)."""
    console = Console(highlight=False, **kw)
    if not console.is_terminal:
        console.soft_wrap = True  # lines of text are never wrapped in a pipe
    return console


def print_wide(console: Console, renderable: RenderableType) -> None:
    """Print a table: fitted to a terminal's width; at its natural width anywhere else (no wrapping)."""
    if console.is_terminal:
        console.print(renderable)
        return
    natural = Measurement.get(console, console.options.update(width=UNBOUNDED), renderable).maximum
    width = console.width
    console.width = max(width, natural)
    try:
        console.print(renderable)
    finally:
        console.width = width

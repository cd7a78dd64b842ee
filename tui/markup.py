"""Text from outside (agent text, pack text, user input, file names, error messages) must show as
written: Textual reads `[...]` in a str as markup, so `pip install warpsmith[anthropic]` would lose
its `[anthropic]` and `[bold red]` would restyle the line. Strings reach Textual escaped (or as
rich Text objects, which are never parsed); a message with markup on purpose is wrapped in Markup."""
from __future__ import annotations

from textual.markup import escape


class Markup(str):
    """A string written with markup on purpose, with no outside text in it."""


def plain(text: object) -> str:
    """`text` escaped for a place that reads markup (notifications, Static, DataTable cells)."""
    return text if isinstance(text, Markup) else escape(str(text))

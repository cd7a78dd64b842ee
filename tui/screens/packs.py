"""Pack picker: packs grouped by kind, a preview of the highlighted pack's markdown.

Dismisses the new list of selected ids (None when cancelled or unchanged). The catalog is
discovered off the UI thread (entry points, folders and possibly a GPU probe for defaults).
"""
from __future__ import annotations

from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Markdown, SelectionList, Static
from textual.widgets.selection_list import Selection

from harness.packs import KINDS, Catalog, Pack

HEADER = "__kind__:"


def pack_preview(p: Pack) -> str:
    head = (f"# {p.title}\n\n`{p.id}` · {p.kind} · v{p.version} · {p.origin}\n\n"
            + (f"applies to: {', '.join(f'{k}={v}' for k, v in p.applies_to.items())}\n\n" if p.applies_to else "")
            + (f"sources: {', '.join(p.sources)}\n\n" if p.sources else ""))
    rules = "".join(f"- **{r.get('id')}**: {r.get('message', '')}\n" for r in p.rule_specs())
    return head + (f"## Rules\n\n{rules}\n" if rules else "") + p.content()


def grouped_selections(catalog: Catalog, selected: list[str]) -> list[Selection]:
    out: list[Selection] = []
    for kind in KINDS:
        packs = [p for p in catalog.sorted() if p.kind == kind]
        if not packs:
            continue
        out.append(Selection(f"── {kind} ──", f"{HEADER}{kind}", False, disabled=True))
        out += [Selection(f"{p.id}  {p.title}", p.id, p.id in selected) for p in packs]
    return out


class PackPickerScreen(ModalScreen["list[str] | None"]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("a", "apply", "apply (from the next prompt)"),
    ]

    def __init__(self, selected: list[str], catalog: Catalog | None = None) -> None:
        super().__init__()
        self.selected = list(selected)
        self.catalog = catalog

    def compose(self) -> ComposeResult:
        with Vertical(id="packs-box"):
            yield Static("Packs: Space toggles · a applies from the next prompt · Esc cancels", id="packs-title")
            with Horizontal(id="packs-body"):
                yield SelectionList[str](id="pack-list")
                yield Markdown("loading packs…", id="pack-preview")
            yield Static("", id="packs-errors")

    def on_mount(self) -> None:
        if self.catalog is None:
            self.discover()
        else:
            self._fill(self.catalog)

    @work(thread=True, exclusive=True, group="packs")
    def discover(self) -> None:
        from harness.packs import discover

        catalog = discover()
        self.app.call_from_thread(self._fill, catalog)

    def _fill(self, catalog: Catalog) -> None:
        self.catalog = catalog
        sl = self.query_one("#pack-list", SelectionList)
        sl.clear_options()
        sl.add_options(grouped_selections(catalog, self.selected))
        missing = [i for i in self.selected if i not in catalog.packs]
        notes = [f"selected but not found: {', '.join(missing)}"] if missing else []
        notes += [str(e) for e in catalog.errors[:3]]
        self.query_one("#packs-errors", Static).update("\n".join(notes))
        sl.focus()
        first = next((i for i in range(sl.option_count) if not sl.get_option_at_index(i).disabled), None)
        if first is not None:
            sl.highlighted = first
        else:
            self.query_one("#pack-preview", Markdown).update("no packs found")

    @on(SelectionList.SelectionHighlighted, "#pack-list")
    def preview(self, event: SelectionList.SelectionHighlighted) -> None:
        pid = event.selection.value
        if self.catalog is None or pid.startswith(HEADER):
            return
        self.query_one("#pack-preview", Markdown).update(pack_preview(self.catalog.packs[pid]))

    def action_apply(self) -> None:
        if self.catalog is None:
            return
        chosen = [v for v in self.query_one("#pack-list", SelectionList).selected if not v.startswith(HEADER)]
        # Ids that are selected but not in the catalog (a pack folder gone) stay: the loop reports them.
        chosen += [i for i in self.selected if i not in self.catalog.packs]
        self.dismiss(None if sorted(chosen) == sorted(self.selected) else chosen)

    def action_cancel(self) -> None:
        self.dismiss(None)

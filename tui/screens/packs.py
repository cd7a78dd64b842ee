"""Pack picker: packs grouped by kind, a preview of the highlighted pack's markdown.

Dismisses the new list of selected ids (None when cancelled or unchanged). The catalog is
discovered off the UI thread (entry points, folders and possibly a GPU probe for defaults).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from rich.segment import Segment
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.strip import Strip
from textual.widgets import Markdown, SelectionList, Static
from textual.widgets.option_list import OptionDoesNotExist
from textual.widgets.selection_list import Selection

from harness.authoring.hardware import summary as hardware_summary
from harness.authoring.packs import KINDS, Catalog, Pack, discover

HEADER = "__kind__:"
ON, OFF = "[x] ", "[ ] "  # on/off readable without colour; as wide as SelectionList's ▐X▌ gutter


class PackList(SelectionList[str]):
    """A SelectionList drawing `[x]`/`[ ]` (its ▐X▌ told on from off by colour alone), no box on
    section headers (disabled rows), and a cursor that stops at the first and last pack instead of
    wrapping round (OptionList's up/down wrap, with no setting to turn that off in Textual 8)."""

    COMPONENT_CLASSES = {"pack-list--on", "pack-list--off", "pack-list--header"}  # styled in packs.tcss

    def _get_left_gutter_width(self) -> int:
        return len(ON)

    def render_line(self, y: int) -> Strip:
        line = super(SelectionList, self).render_line(y)  # the option's prompt, as OptionList draws it
        try:
            selection = self.get_option_at_index(self.scroll_offset.y + y)  # one line per option (nowrap)
        except OptionDoesNotExist:
            return line
        base = next(iter(line)).style or self.rich_style
        if selection.disabled:  # a section header: no box, flush left
            style = base + self.get_component_rich_style("pack-list--header", partial=True)
            return Strip([Segment(seg.text, style) for seg in line] + [Segment(" " * len(ON), base)])
        on = selection.value in self._selected
        mark = self.get_component_rich_style("pack-list--on" if on else "pack-list--off", partial=True)
        return Strip([Segment(ON if on else OFF, base + mark), *line])

    def _step(self, direction: int) -> None:
        if self.highlighted is None:
            return self.action_first() if direction > 0 else self.action_last()
        i = self.highlighted + direction
        while 0 <= i < self.option_count:
            if not self.get_option_at_index(i).disabled:
                self.highlighted = i
                return None
            i += direction
        return None  # at an end: stay (no wrapping round to the other end)

    def action_cursor_up(self) -> None:
        self._step(-1)

    def action_cursor_down(self) -> None:
        self._step(1)


def pack_preview(p: Pack) -> str:
    head = (f"# {p.title}\n\n`{p.id}` · {p.kind} · v{p.version} · {p.origin}\n\n"
            + (f"applies to: {', '.join(f'{k}={v}' for k, v in p.applies_to.items())}\n\n" if p.applies_to else "")
            + (f"sources: {', '.join(p.sources)}\n\n" if p.sources else ""))
    rules = "".join(f"- **{r.get('id')}**: {r.get('message', '')}\n" for r in p.rule_specs())
    hw = hardware_summary(p) if p.kind == "hardware" else ""  # has / ABSENT, as the prompt says it
    device = "## Device\n\n" + "".join(f"- {line}\n" for line in hw.splitlines()) + "\n" if hw else ""
    return head + device + (f"## Rules\n\n{rules}\n" if rules else "") + p.content()


def grouped_selections(catalog: Catalog, selected: list[str], enforced: Iterable[str] = ()) -> list[Selection]:
    """Packs under a header per kind; `enforced`: packs the guard applies anyway (the task's)."""
    enforced = set(enforced)
    out: list[Selection] = []
    for kind in KINDS:
        packs = [p for p in catalog.sorted() if p.kind == kind]
        if not packs:
            continue
        out.append(Selection(Text(f"── {kind} ──"), f"{HEADER}{kind}", False, disabled=True))
        for p in packs:
            prompt = Text(p.id)
            if p.id in enforced:
                prompt.append(" (task)", style="italic")
            prompt.append(f"  {p.title}")
            broken = getattr(catalog, "broken", {}).get(p.id)
            if broken is not None:  # a higher-precedence copy fails to load: selecting it stops a run
                prompt.append(f"  BROKEN: {broken.path}" + (f":{broken.line}" if broken.line else ""), style="bold red")
            out.append(Selection(prompt, p.id, p.id in selected))
    return out


def unselected_enforced_note(pack_id: str, task_name: str) -> str:
    return (f"{pack_id} is one of the {task_name or 'task'} task's own rules packs: its rules are still "
            "enforced on every candidate; turning it off only takes its text out of the prompt")


class PackPickerScreen(ModalScreen["list[str] | None"]):
    CSS_PATH = Path(__file__).with_suffix(".tcss")
    BINDINGS = [
        Binding("escape", "cancel", "cancel"),
        Binding("a", "apply", "apply (from the next prompt)"),
    ]

    def __init__(self, selected: list[str], catalog: Catalog | None = None, enforced: Iterable[str] = (),
                 task_name: str = "") -> None:
        super().__init__()
        self.selected = list(selected)
        self.catalog = catalog
        self.enforced = list(enforced)  # the task's rules packs: the guard applies them regardless
        self.task_name = task_name

    def compose(self) -> ComposeResult:
        with Vertical(id="packs-box"):
            yield Static("Packs: [x] on, [ ] off · Space toggles · a applies from the next prompt · "
                         "Esc cancels", id="packs-title", markup=False)
            with Horizontal(id="packs-body"):
                yield PackList(id="pack-list")
                yield Markdown("loading packs…", id="pack-preview")
            yield Static("", id="packs-note")
            yield Static("", id="packs-errors")

    def on_mount(self) -> None:
        if self.catalog is None:
            self.discover()
        else:
            self._fill(self.catalog)

    @work(thread=True, exclusive=True, group="packs")
    def discover(self) -> None:
        catalog = discover()
        self.app.call_from_thread(self._fill, catalog)

    def _fill(self, catalog: Catalog) -> None:
        self.catalog = catalog
        sl = self.query_one("#pack-list", SelectionList)
        sl.clear_options()
        sl.add_options(grouped_selections(catalog, self.selected, self.enforced))
        missing = [i for i in self.selected if i not in catalog.packs]
        notes = [f"selected but not found: {', '.join(missing)}"] if missing else []
        notes += [str(e) for e in catalog.errors[:3]]
        self.query_one("#packs-errors", Static).update(Text("\n".join(notes)))  # file names, pack errors: not markup
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

    @on(SelectionList.SelectionToggled, "#pack-list")
    def toggled(self, event: SelectionList.SelectionToggled) -> None:
        pid = event.selection.value
        off = pid not in event.selection_list.selected
        note = unselected_enforced_note(pid, self.task_name) if off and pid in self.enforced else ""
        self.query_one("#packs-note", Static).update(Text(note))

    def action_apply(self) -> None:
        if self.catalog is None:
            return
        chosen = [v for v in self.query_one("#pack-list", SelectionList).selected if not v.startswith(HEADER)]
        # Ids that are selected but not in the catalog (a pack folder gone) stay: the loop reports them.
        chosen += [i for i in self.selected if i not in self.catalog.packs]
        self.dismiss(None if sorted(chosen) == sorted(self.selected) else chosen)

    def action_cancel(self) -> None:
        self.dismiss(None)

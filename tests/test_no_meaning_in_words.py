"""No code of warpsmith decides anything from the words of a notice.

A notice (`AgentNotice.message`, a pack-selection note) is a line for a person to read. What a
program must act on (the agent switched, the hardware pack chosen) is a typed event with fields
(harness/events.py: AgentSwitched, HardwarePackChosen): rewording a line must never change what the
TUI or the loop does. This test reads the source of harness/, tui/ and warpsmith/ with `ast` and
lists every place that compares notice text with a string, or asks it for a prefix, a suffix or a
substring.

Notice text, as this test knows it: an attribute `.message` of anything; a name `message`,
`notice` or `note`; a loop or comprehension variable over something called `notes`, `notices` or
`messages`; and any of these through a string method (`note.lower()`).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "tui", "warpsmith")

TEXT_NAMES = {"message", "notice", "note"}
TEXT_COLLECTIONS = {"notes", "notices", "messages"}
# Methods that give back the text, reshaped: reading meaning from their result is the same thing.
RESHAPE = {"lower", "upper", "casefold", "strip", "lstrip", "rstrip", "removeprefix", "removesuffix"}
# Methods that read meaning from words.
QUESTIONS = {"startswith", "endswith", "removeprefix", "removesuffix", "find", "rfind", "index", "rindex",
             "count", "partition", "rpartition"}
# re's functions that read meaning from words when given notice text.
REGEX = {"match", "search", "fullmatch", "findall", "finditer"}


def _collection_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _target_names(target: ast.expr) -> set[str]:
    return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}


class Finder(ast.NodeVisitor):
    """Finds the places in one module that read meaning from notice text."""

    def __init__(self, path: Path):
        self.path = path
        self.found: list[str] = []
        self.loop_text: set[str] = set()  # names bound by iterating over notes, notices or messages

    # -- what is notice text ------------------------------------------------------------------
    def is_text(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Attribute) and node.attr == "message":
            return True
        if isinstance(node, ast.Name):
            return node.id in TEXT_NAMES or node.id in self.loop_text
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in RESHAPE):
            return self.is_text(node.func.value)
        return False

    @staticmethod
    def is_words(node: ast.expr) -> bool:
        """A string written in the source (or a collection of them)."""
        if isinstance(node, ast.Constant):
            return isinstance(node.value, str)
        if isinstance(node, ast.JoinedStr):
            return True
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(Finder.is_words(e) for e in node.elts)
        return False

    def report(self, node: ast.AST, what: str) -> None:
        rel = self.path.relative_to(ROOT)
        self.found.append(f"{rel}:{node.lineno}: {what}: {ast.unparse(node)}")

    # -- where it is bound ----------------------------------------------------------------------
    def _bind(self, target: ast.expr, iterable: ast.expr) -> None:
        if _collection_name(iterable) in TEXT_COLLECTIONS:
            self.loop_text |= _target_names(target)

    def visit_For(self, node: ast.For) -> None:
        self._bind(node.target, node.iter)
        self.generic_visit(node)

    def _visit_comprehension(self, node: ast.AST) -> None:
        for gen in node.generators:  # type: ignore[attr-defined]
            self._bind(gen.target, gen.iter)
        self.generic_visit(node)

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension

    # -- where meaning is read from it ------------------------------------------------------------
    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:]):
            if isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)) and (
                    (self.is_text(left) and self.is_words(right)) or (self.is_words(left) and self.is_text(right))):
                self.report(node, "notice text compared with words")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute):
            if f.attr in QUESTIONS and self.is_text(f.value):
                self.report(node, f"notice text asked .{f.attr}()")
            elif (f.attr in REGEX and isinstance(f.value, ast.Name) and f.value.id == "re"
                  and any(self.is_text(a) for a in node.args)):
                self.report(node, f"notice text matched with re.{f.attr}")
        self.generic_visit(node)


def findings(source: str, path: Path) -> list[str]:
    finder = Finder(path)
    finder.visit(ast.parse(source, str(path)))
    return finder.found


def test_no_code_reads_meaning_from_the_words_of_a_notice():
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            found += findings(path.read_text(encoding="utf-8"), path)
    assert not found, ("these read meaning from the words of a notice; emit a typed event "
                       "(harness/events.py) where the meaning arises and react to its type:\n  "
                       + "\n  ".join(found))


# What the scan must catch: the three places this test was written against (issue 39), as they were.
CAUGHT = {
    "tui/state.py": '''
def apply(self, e):
    if isinstance(e, ev.AgentNotice):
        if e.message.startswith("agent switched to "):
            self.agent = e.message.removeprefix("agent switched to ").strip()
''',
    "tui/app.py": '''
async def on_loop_event(self, message):
    e = message.event
    if isinstance(e, ev.AgentNotice) and e.iteration == 0 and e.message.startswith("hardware"):
        self.notify(e.message, severity="warning" if "none chosen" in e.message else "information")
''',
    "harness/wiring.py": '''
def build_loop():
    for note in notes:
        if "no hardware pack selected" in note.lower() and any(p.kind == "hardware" for p in packs):
            continue
''',
    "harness/authoring/packs.py": '''
def session_selection():
    notes = [n for n in notes if not n.startswith("hardware: none chosen")]
''',
}


def test_the_scan_catches_the_places_it_was_written_against():
    for rel, source in CAUGHT.items():
        assert findings(source, ROOT / rel), f"{rel}: not caught"
    hits = findings(CAUGHT["tui/app.py"], ROOT / "tui/app.py")
    assert len(hits) == 2  # the prefix and the substring


def test_the_scan_leaves_alone_what_only_shows_the_words():
    shown = '''
def render(self, e, notes):
    self.note(e.iteration, e.message, e.level)
    self.notify(e.message, markup=False)
    for n in notes:
        print(f"  {n}")
    if e.level != "info" or e.kind == "hardware":
        pass
    lines = e.message.splitlines()
'''
    assert findings(shown, ROOT / "tui/example.py") == []

"""Text from outside shows literally: `[anthropic]`-style brackets and `[bold red]` fed through the
agent's reasoning, the candidate's code and description, the verdict's reasons and shape names, the
ideas list, the sessions list, the agent-switch error and other notifications (a str reaching Textual
is read as markup: `[anthropic]` would vanish and `[bold red]` restyle the line)."""
from __future__ import annotations

from pathlib import Path

from tui.markup import Markup, plain
from tui.screens.ideas import IdeasScreen
from tui.screens.sessions import SessionsScreen
from tui.testing import _variant, make_app, screen_text, softmax_task, verdict
from tui_helpers import wait_prompt, wait_until

SIZE = (280, 60)  # wide: beside an open decision the reasoning is a quarter of the width
TAG = "[bold red]"
EXTRA = "warpsmith[anthropic]"


def _script(folder: Path) -> Path:
    folder.mkdir(parents=True)
    base = softmax_task().baseline_path.read_text()
    src = _variant(base, 1024, 2, f"warps 2 {TAG}desc {EXTRA}")
    src = src.replace("BLOCK = 1024", f"BLOCK = 1024  # {TAG}code {EXTRA}")
    (folder / "01_brackets.py").write_text(src)
    (folder / "01_brackets.md").write_text(f"Reasoning with {TAG}reason and {EXTRA} inside.\n")
    return folder


def _verdict() -> dict:
    v = verdict(softmax_task(), timing=True, speedup=0.97)
    v["shapes"][0]["name"] = f"{TAG}rows"
    v["recommendation"]["reason"] = f"slower {TAG}rec {EXTRA}"
    return v


def toasts(app) -> list[str]:
    """The notifications on screen, as a person reads them."""
    from textual.widgets._toast import Toast

    return [t.render().plain for t in app.screen.query(Toast)]


def test_plain_escapes_all_but_deliberate_markup():
    assert plain(f"{TAG}x") == "\\[bold red]x"
    assert plain(Markup("[b]q[/b]")) == "[b]q[/b]"


async def test_brackets_show_literally_in_every_pane_and_notification(tmp_path: Path):
    app = make_app(tmp_path, verdicts=[_verdict()], iterations=1, script_dir=_script(tmp_path / "script"))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await wait_prompt(pilot, app, 1)
        await pilot.press("f")  # the whole candidate, its comment line included
        await pilot.pause(0.2)
        text = screen_text(app)
        for seen in (f"{TAG}reason and {EXTRA}",   # reasoning pane
                     f"# {TAG}code {EXTRA}",        # diff pane
                     f"{TAG}rows",                  # bench: shape table
                     f"{TAG}desc {EXTRA}",          # decision bar: the candidate's description
                     ):
            assert seen in text, seen
        # a notification carrying an error message from outside (an agent switch that fails)
        # (typed into the model dialog, `m`: its answer runs _set_agent in a worker thread)
        app.run_worker(lambda: app._set_agent(f"nope{EXTRA}"), thread=True, group="model")
        await wait_until(pilot, lambda: any(t.startswith(f"cannot switch to nope{EXTRA}: ") for t in toasts(app)),
                         what="the switch error, shown at once")
        app.notify(f"{TAG}note {EXTRA}")
        await wait_until(pilot, lambda: f"{TAG}note {EXTRA}" in toasts(app), what="a notification")
        # the ideas list (user input)
        app.push_screen(IdeasScreen(list(app.session.meta.ideas)))
        await pilot.pause(0.2)
        await pilot.press(*f"{TAG}idea", "enter")
        await pilot.pause(0.2)
        assert f"{TAG}idea" in screen_text(app)
        app.pop_screen()
        await pilot.pause(0.1)
        # the sessions list (the agent spec, as the session recorded it)
        app.session.meta.agent = f"script:{EXTRA}"
        app.session.save_meta()
        app.push_screen(SessionsScreen(app.session.id, tmp_path))
        await wait_until(pilot, lambda: EXTRA in screen_text(app), what="sessions list")
        app.pop_screen()
        await pilot.press("q")

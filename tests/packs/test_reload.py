"""Live reload: an edit to a selected pack reaches the next prompt; a broken edit keeps the last
good version and is reported. Both through the real watchdog observer and end to end in the loop,
with the provenance hashes written to the session journal."""
from __future__ import annotations

import threading
import time

from harness import events as ev
from harness.authoring.packs import Catalog, PackWatcher, load_pack
from harness.prompt import SessionPrompt, build_prompt
from harness.authoring.tasks import load_task

TASK = load_task("softmax", check_null=False)


def _wait(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.02)
    return False


def test_edit_changes_next_prompt_and_broken_edit_keeps_last_good(tmp_path, write_pack):
    d = write_pack(tmp_path, "hw", files={"a.md": "clock is 1 GHz\n"})
    events: list[tuple[str, bool, str]] = []
    w = PackWatcher([load_pack(d)], lambda *e: events.append(e))
    before = build_prompt(TASK, "src", w.packs())
    (d / "a.md").write_text("clock is 2 GHz\n")
    after = build_prompt(TASK, "src", w.packs())  # no observer running: packs() re-checks itself
    assert "2 GHz" in after.user and "1 GHz" not in after.user
    assert after.packs[0]["sha256"] != before.packs[0]["sha256"]
    assert events[-1][:2] == ("hw", True) and "reloaded hw" in events[-1][2]
    good = after.packs[0]["sha256"]
    (d / "pack.toml").write_text((d / "pack.toml").read_text().replace('version = "1.0.0"', 'version = "one"'))
    (d / "a.md").write_text("clock is 3 GHz\n")
    kept = build_prompt(TASK, "src", w.packs())
    assert "2 GHz" in kept.user and kept.packs[0]["sha256"] == good
    assert events[-1][:2] == ("hw", False)
    assert "pack.toml:4: version: bad version 'one'" in events[-1][2] and "keeping the last good" in events[-1][2]
    n = len(events)
    w.packs()
    assert len(events) == n  # an unchanged broken pack is reported once, not every prompt
    (d / "pack.toml").write_text((d / "pack.toml").read_text().replace('"one"', '"1.1.0"'))
    assert "3 GHz" in build_prompt(TASK, "src", w.packs()).user and events[-1][1] is True


def test_watchdog_reports_edits_without_being_asked(tmp_path, write_pack):
    d = write_pack(tmp_path, "hw", files={"a.md": "v1\n"})
    events: list[tuple[str, bool, str]] = []
    got = threading.Event()

    def cb(*e):
        events.append(e)
        got.set()

    with PackWatcher([load_pack(d)], cb, debounce_s=0.05):
        time.sleep(0.1)
        (d / "a.md").write_text("v2\n")
        assert got.wait(10), "no reload event from the watchdog observer"
        assert events[0][:2] == ("hw", True)
        got.clear()
        # an editor's atomic save: write a temp file and rename it over the original
        (d / "a.md.tmp").write_text("v3 broken? no, valid\n")
        (d / "a.md.tmp").replace(d / "a.md")
        assert got.wait(10)
        assert _wait(lambda: events[-1][1] and "v3" in load_pack(d).content())
    assert events[-1][0] == "hw"


def test_loop_journal_records_pack_provenance_and_picks_up_edits(tmp_path, write_pack):
    from harness.agents.tuner import TunerAgent
    from harness.loop import DecisionReply, Loop
    from harness.sessions.session import Session

    d = write_pack(tmp_path / "packs", "hw", files={"a.md": "first\n"})
    session = Session.create("softmax", "tuner", TASK.baseline_path.read_text(), base=tmp_path, packs=["hw"])
    emitted: list = []
    loop_ref: list = []
    watcher = PackWatcher([load_pack(d)], lambda i, ok, m: loop_ref[0].emit(ev.PackReloaded(i, ok, m)))

    class EditingDecider:  # the person edits the pack while deciding on iteration 1
        def decide(self, request):
            (d / "a.md").write_text("second\n")
            return DecisionReply("revert", "human")

    verdict = {"accepted": True, "stage": "done", "reasons": [], "shapes": [], "timing_available": False,
               "recommendation": {"action": "revert", "reason": "canned", "can_keep": True}}
    loop = Loop(session, TASK, TunerAgent(), EditingDecider(), lambda *a: verdict, emit=emitted.append,
                max_iterations=2)
    builder = loop.prompt_builder = SessionPrompt(session, TASK, Catalog({"hw": load_pack(d)}), watcher, loop.emit)
    loop_ref.append(loop)
    loop.run()
    recs = [r for r in session.journal.read() if r.get("kind") == "PromptPacks"]
    assert [r["iteration"] for r in recs] == [1, 2]
    h1, h2 = recs[0]["packs"][0]["sha256"], recs[1]["packs"][0]["sha256"]
    assert h1 != h2 and h2 == load_pack(d).sha256()
    assert recs[1]["packs"][0]["id"] == "hw" and recs[1]["packs"][0]["version"] == "1.0.0"
    assert "second" in builder.last.user
    reloads = [e for e in emitted if isinstance(e, ev.PackReloaded)]
    assert reloads and reloads[0].pack_id == "hw" and reloads[0].ok


def test_set_packs_changes_what_is_watched(tmp_path, write_pack):
    a, b = write_pack(tmp_path, "a"), write_pack(tmp_path, "b")
    events: list = []
    with PackWatcher([load_pack(a)], lambda *e: events.append(e), debounce_s=0.05) as w:
        w.set_packs([load_pack(b)])
        assert [p.id for p in w.packs()] == ["b"]
        (a / "overview.md").write_text("edit to a pack no longer selected\n")
        (b / "overview.md").write_text("edit to b\n")
        assert _wait(lambda: any(e[0] == "b" for e in events))
        time.sleep(0.3)
        assert all(e[0] == "b" for e in events)
        assert "edit to b" in w.get("b").content()

"""The session report: built from a real session (Loop + ScriptAgent + canned verdicts), rendered to
HTML and markdown, and opened in headless Chromium to check that its images load."""
from __future__ import annotations

import base64
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.agents.script import ScriptAgent
from warpsmith.cli import main
from harness.model.dispatch import keep_for_buckets
from harness.loop import AutoDecider, Loop
from harness.sessions.report import build_report, collect, outcome_counts, write_report
from harness.sessions.session import Session

from harness.authoring.tasks import load_task

from model_helpers import ONEPASS, bucketed_softmax, partial_win, shape_row, verdict

PACKS = [{"id": "h200", "version": "1.0.0", "sha256": "ab" * 32}, {"id": "reward-hacks", "version": "1.2.0", "sha256": "cd" * 32}]


def canned(it: int) -> dict:
    fast = [shape_row("many short rows", {"rows": 65536, "cols": 512}, 30.0, 40.0, roofline=60),
            shape_row("4k x 4k", {"rows": 4096, "cols": 4096}, 30.0, 36.0, roofline=55),
            shape_row("long rows 128k", {"rows": 1024, "cols": 131072}, 280.0, 300.0, roofline=70)]
    return {
        1: verdict(fast),  # kept
        2: verdict([], accepted=False, stage="correctness", action="revert",
                   reasons=[{"rule": "correctness", "message": "4k x 4k: 12 elements off"}]),
        3: partial_win(),  # wins short/mid, loses long: recommended revert, then kept for buckets
        4: verdict(fast, accepted=False, stage="e2e", action="revert",
                   reasons=[{"rule": "e2e-slower", "message": "wins alone but loses end to end"}]),
        5: verdict([], accepted=False, stage="static", action="revert",
                   violations=[{"rule": "no-torch-fallback", "message": "calls torch.softmax", "line": 3}]),
    }[it]


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    # one session (and its matplotlib work) for the module: 2 shared cores
    tmp_path = tmp_path_factory.mktemp("report")
    task = load_task(bucketed_softmax(tmp_path))
    script = tmp_path / "script"
    script.mkdir()
    base = task.baseline_path.read_text()
    (script / "01_block2048.py").write_text(base.replace("BLOCK = 1024", "BLOCK = 2048"))
    (script / "02_broken.py").write_text(base.replace("/ row_sum", "/ (row_sum + 1)"))
    (script / "03_onepass.py").write_text(ONEPASS.read_text())
    (script / "04_layout.py").write_text(base.replace("num_warps=4", "num_warps=8"))
    (script / "05_torch.py").write_text("import torch\n\ndef softmax(x):\n    return torch.softmax(x, -1)\n")
    s = Session.create(task.name, "script", base, base=tmp_path)

    def evaluate(t, cand: Path, inc: Path) -> dict:
        return canned(int(re.search(r"candidate_(\d+)", cand.name).group(1)))

    loop = Loop(s, task, ScriptAgent(script), AutoDecider(), evaluate, max_iterations=5,
                prompt_builder=lambda ctx: ("system", "prompt", PACKS))
    assert loop.run() == "iterations done"
    keep_for_buckets(s, 3, s.workspace.candidate_ref(3), ["short rows", "mid rows"], task, partial_win(),
                     by="human", reason="keep where it wins")
    s.test_task = task  # the bucketed copy: load_task("softmax") would find the built-in one
    return s


def test_steps_and_outcomes_from_the_journal(session):
    steps = collect(session)
    assert [s.outcome for s in steps] == ["kept", "incorrect", "kept for buckets", "rejected: e2e-slower",
                                         "rejected: no-torch-fallback"]
    assert steps[0].model == "script" and steps[0].packs == PACKS
    assert outcome_counts(steps)["kept"] == 1


def test_html_report_has_plots_provenance_and_diff(session, tmp_path):
    out = write_report(session, tmp_path / "r" / "report.html", task=session.test_task)
    text = out.read_text()
    imgs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', text)
    assert len(imgs) == 3
    for b in imgs:
        assert base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "h200@1.0.0#abababab, reward-hacks@1.2.0#cdcdcdcd" in text  # pack provenance of the kept step
    assert "rejected: e2e-slower" in text and "rejected: no-torch-fallback" in text
    assert "short rows, mid rows" in text and "short rows: 2.000x" in text
    assert '<span class="del">-BLOCK = 1024</span>' in text and '<span class="add">+BLOCK = 2048</span>' in text
    g = (40 / 30 * 36 / 30 * 300 / 280) ** (1 / 3)  # best vs baseline: the one kept step's geomean
    assert f"{g:.3f}x (product of kept steps" in text
    # the dispatch table: short/mid from the bucket keep of iteration 3, long from the kept best (iteration 1)
    assert "<td>short rows</td><td>cols in [1, 1025)</td><td>iter 3" in text
    assert "<td>long rows</td><td>cols in [32769, inf)</td><td>best, iter 1" in text
    assert "iteration 3 (" in text and "kept for buckets</h3>" in text  # the bucket winner's own diff
    assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text  # offline


def test_markdown_report_writes_pngs_beside(session, tmp_path):
    out = write_report(session, tmp_path / "report.md", fmt="md", task=session.test_task)
    text = out.read_text()
    pngs = sorted((tmp_path / "report_files").glob("*.png"))
    assert [p.name for p in pngs] == ["outcomes.png", "progress.png", "shapes.png"]
    assert "![progress](report_files/progress.png)" in text and "```diff" in text
    assert "| short rows | cols in [1, 1025) | iter 3" in text


def test_report_command(session, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(session.root.parent.parent.parent)  # sessions live under ./.warpsmith/sessions
    assert main(["report", session.id, "-o", str(tmp_path / "c.html")]) == 0
    assert (tmp_path / "c.html").read_text().startswith("<!doctype html>")
    assert main(["report", "no-such-session"]) == 2
    assert "no session 'no-such-session'" in capsys.readouterr().err


def test_report_of_an_untimed_session_says_so(task, tmp_path):
    s = Session.create(task.name, "script", task.baseline_path.read_text(), base=tmp_path)
    rep = build_report(s)
    assert dict(rep.summary)["best vs baseline"] == "timing unavailable (Triton interpreter)"
    assert len(rep.plots) == 3 and all(png[:4] == b"\x89PNG" for _, _, png in rep.plots)


CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
# Runs in the page after load: records whether every image decoded (naturalWidth > 0).
CHECK_JS = """<script>window.addEventListener('load', function () {
  var imgs = Array.prototype.slice.call(document.images);
  document.body.setAttribute('data-images', imgs.length);
  document.body.setAttribute('data-loaded', imgs.filter(function (i) { return i.complete && i.naturalWidth > 0; }).length);
});</script>"""


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)")
def test_report_opens_in_headless_chromium_and_images_load(session, tmp_path):
    out = write_report(session, tmp_path / "report.html")
    page = tmp_path / "report_checked.html"
    page.write_text(out.read_text().replace("</body>", CHECK_JS + "</body>"))
    profile = tmp_path / "chromium-profile"
    r = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    body = re.search(r"<body[^>]*>", r.stdout)
    assert body, f"no DOM dumped; chromium stderr: {r.stderr[-500:]}"
    assert 'data-images="3"' in body.group(0) and 'data-loaded="3"' in body.group(0), body.group(0)

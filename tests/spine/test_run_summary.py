"""A headless run ends with one summary block: the tally as results.tsv counts it (a syntax error
included), the best candidate per shape with its noise band (or 'timing unavailable'), the session
folder and the commands to export, report and resume; no chatter about packs in between."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from harness import events as ev
from harness.cli import main
from harness.summary import _best_lines

ROOT = Path(__file__).resolve().parents[2]


def test_headless_run_ends_with_one_summary_block(tmp_path, monkeypatch, capsys):
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "01_syntax.py").write_text("def softmax(x):\n    return x +\n")
    shutil.copy(ROOT / "kernels" / "softmax" / "candidates" / "onepass.py", agent / "02_onepass.py")
    monkeypatch.chdir(tmp_path)
    rc = main(["run", "softmax", "--headless", "--auto", "--quiet", "--iterations", "2", "--agent",
               f"script:{agent}", "--packs", "h200"])
    out = capsys.readouterr().out
    assert rc == 0
    session = next((tmp_path / ".warpsmith" / "sessions").iterdir())
    rows = [line.split("\t") for line in (session / "results.tsv").read_text().splitlines()]
    counts = Counter(row[rows[0].index("outcome")] for row in rows[1:])
    assert counts == {"rejected": 1, "reverted": 1}

    block = out[out.index("session ended:"):].splitlines()
    assert block[0] == "session ended: iterations done after 2 iterations"
    assert block[1] == "  tally: 0 kept, 1 reverted, 1 rejected, 0 incorrect, 0 crashed (2 decided, as in results.tsv)"
    assert block[2].startswith("  best: the baseline (nothing kept); timing unavailable")
    sid = session.name
    assert block[3:] == [f"  session folder: {session}",
                         f"  export the best:  warpsmith sessions export {sid} -o best_kernel.py",
                         f"  report:           warpsmith report {sid} -o report.html",
                         f"  resume:           warpsmith sessions resume {sid} --iterations 10 --headless"]
    # h200 was selected: no line says there is no hardware pack; the selection's reasons are not chatted
    assert "no hardware pack selected" not in out.lower()
    assert "h200@" in out and "agent info" not in out
    # the syntax error's reason is said once, not three times
    assert out.count("invalid syntax") == 1


def _records(verdict: dict) -> list[dict]:
    return [{"kind": "EvalResult", "iteration": 1, "verdict": verdict},
            {"kind": "Decision", "iteration": 1, "action": "keep", "commit": "0123456789abcdef"}]


def test_best_lines_give_each_shape_with_its_noise_band():
    v = {"timing_available": True, "geomean_speedup": 1.08, "noise_band_pct": 1.5,
         "shapes": [{"name": "4k x 4k", "speedup": 1.1, "noise_pct": 2.0},
                    {"name": "long rows", "speedup": 1.06, "noise_pct": 1.2}]}
    assert _best_lines(_records(v)) == [
        "  best: #1 0123456789, geomean 1.080x ±1.5% against the incumbent it replaced",
        "    4k x 4k                      1.100x ±2.0%",
        "    long rows                    1.060x ±1.2%"]


def test_a_keep_without_timing_says_so():
    assert _best_lines(_records({"timing_available": False}))[0].endswith(
        "timing unavailable (kept without a measured speedup)")


def test_interrupted_summary_counts_what_was_decided(tmp_path):
    from harness.session import Session
    from harness.summary import summary_lines

    s = Session.create("softmax", "tuner", (ROOT / "kernels" / "softmax" / "kernel.py").read_text(), base=tmp_path)
    s.record(ev.IterationStarted(1).to_dict())
    lines = summary_lines(s, None)
    assert lines[0] == "session interrupted after 1 iteration"
    assert "0 kept, 0 reverted" in lines[1] and lines[-1].endswith(f"sessions resume {s.id} --headless")

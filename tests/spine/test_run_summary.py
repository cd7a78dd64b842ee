"""A headless run ends with one summary block: the tally as results.tsv counts it (a syntax error
included), the best candidate per shape with its noise band (or 'timing unavailable'), the session
folder and the commands to export, report and resume; no chatter about packs in between."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

from harness import events as ev
from warpsmith.cli import main
from harness.sessions.summary import _best_lines

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
    from harness.sessions.session import Session
    from harness.sessions.summary import summary_lines

    s = Session.create("softmax", "tuner", (ROOT / "kernels" / "softmax" / "kernel.py").read_text(), base=tmp_path)
    s.record(ev.IterationStarted(1).to_dict())
    lines = summary_lines(s, None)
    assert lines[0] == "session interrupted after 1 iteration"
    assert "0 kept, 0 reverted" in lines[1] and lines[-1].endswith(f"sessions resume {s.id} --headless")


def test_the_summary_says_per_bucket_how_far_the_kept_kernel_is_from_the_roofline(tmp_path):
    """Issue 36: each bucket's kernel at the end (a keep, or a per-bucket keep) and its % of copy
    bandwidth: the verdict's roofline_pct, else bytes_moved over the hardware pack's copy bandwidth;
    the figure is the lowest over the shapes of 10 us and more at the roofline."""
    from types import SimpleNamespace

    from harness.sessions.history import SessionHistory
    from harness.sessions.summary import _roofline_lines

    (tmp_path / "pack.toml").write_text('id = "box"\nkind = "hardware"\n[specs]\nmeasured_copy_tb_s = 4.0\n')

    def shape(name, cols, us, pct=None, moved=None):
        return {"name": name, "dims": {"rows": 8, "cols": cols}, "correct": True, "candidate_us": us,
                "incumbent_us": us * 1.1, "speedup": 1.1, "noise_pct": 1.0, "roofline_pct": pct, "bytes_moved": moved}

    kept = {"timing_available": True, "shapes": [
        shape("many short rows", 512, 40.0, 79.0), shape("4k x 4k", 4096, 30.0, 50.0),
        # no measured bandwidth here: 4 TB/s from the pack: 240e6 B is 60 us at the roofline, 75% of 80 us
        shape("vocab 32k", 32768, 80.0, moved=240e6), shape("long rows 128k", 131072, 200.0, 60.0)]}
    short = {"timing_available": True, "shapes": [shape("many short rows", 512, 33.0, 96.0)]}
    records = [{"kind": "PromptPacks", "iteration": 1, "packs": [{"id": "box", "path": str(tmp_path)}]},
               {"kind": "EvalResult", "iteration": 1, "verdict": kept},
               {"kind": "Decision", "iteration": 1, "action": "keep", "commit": "aaaa"},
               {"kind": "EvalResult", "iteration": 2, "verdict": short},
               {"kind": "BucketKeep", "iteration": 2, "commit": "bbbb", "buckets": ["short"], "measurements": {}}]
    lines = _roofline_lines(SimpleNamespace(meta=SimpleNamespace(task="softmax")), SessionHistory.fold(records))
    assert lines == [
        "  roofline, per bucket (% of copy bandwidth; the kernel each one runs now):",
        "    short    #2 (kept for this bucket): 96% of the roofline, within 5% of it: the tuner stops there "
        "(many short rows 96%)",
        "    mid      #1 (the best): 50% of the roofline, 50 points from it (4k x 4k 50%)",
        "    long     #1 (the best): 60% of the roofline, 40 points from it (vocab 32k 75% | long rows 128k 60%)"]
    # Nothing timed (no GPU): no roofline block at all.
    untimed = [{**r, "verdict": {**r["verdict"], "timing_available": False}} if r["kind"] == "EvalResult" else r
               for r in records]
    assert _roofline_lines(SimpleNamespace(meta=SimpleNamespace(task="softmax")), SessionHistory.fold(untimed)) == []

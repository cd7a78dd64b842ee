"""The per-shape table of bench/compare.py (harness/profiling/compare.py; issue 24's done-when is read
off it on the H200): written here from fabricated per-shape cells, since the timing needs a GPU. A
wrong kernel's time is no figure, Liger failing on a shape is said, and the >= 80% count covers only
shapes with a roofline time >= 10 us."""
from __future__ import annotations

from harness.profiling import compare


def cell(us, floor, correct=True):
    return {"us": us, "correct": correct, "roofline_pct": 100 * floor / us if us else None}


def test_the_table_counts_the_targets_and_never_times_a_wrong_kernel(capsys):
    rows = [
        {"shape": "4k x 4k", "floor_us": 15.9, "eager": cell(134.8, 15.9), "baseline": cell(30.8, 15.9),
         "liger": cell(21.8, 15.9), "best": cell(18.9, 15.9)},                     # 84%, beats Liger
        {"shape": "long rows 128k", "floor_us": 126.0, "eager": cell(1089.0, 126.0), "baseline": cell(279.7, 126.0),
         "liger": {"us": None, "correct": False, "roofline_pct": None, "error": "OutOfResources"},
         "best": cell(150.0, 126.0)},                                              # 84%
        {"shape": "decode 128 x 7168", "floor_us": 0.9, "eager": cell(9.0, 0.9), "baseline": cell(5.0, 0.9),
         "liger": cell(4.0, 0.9), "best": cell(4.5, 0.9)},                          # < 10 us: not counted
        {"shape": "vocab 32k", "floor_us": 31.7, "eager": cell(495.4, 31.7), "baseline": cell(121.8, 31.7),
         "liger": cell(45.0, 31.7), "best": cell(30.0, 31.7, correct=False)},      # wrong: no figure
    ]
    compare.print_table(rows, ["eager", "baseline", "liger", "best"])
    out = capsys.readouterr().out
    assert "best as % of copy bandwidth (shapes with a roofline time >= 10 us): 4k x 4k 84% | long rows 128k 84% " \
           "| vocab 32k no figure; at >= 80%: 2/3" in out
    assert "best at or faster than Liger-Kernel on 1/3 shapes where Liger runs; Liger fails on long rows 128k" in out
    [vocab] = [line for line in out.splitlines() if line.startswith("vocab 32k")]
    assert "WRONG" in vocab and "liger" in vocab  # the best cell says wrong; Liger is the fastest right one
    assert "geomean speedup of best over baseline: " in out and "(3 shapes where both ran)" in out

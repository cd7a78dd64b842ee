"""Helpers for the kernel-to-model tests: a softmax task copy with buckets and an e2e workload,
canned verdicts in the evaluator's shape."""
from __future__ import annotations

import shutil
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
SOFTMAX = REPO / "kernels" / "softmax"
ONEPASS = SOFTMAX / "candidates" / "onepass.py"

BUCKETS = [{"name": "short rows", "dim": "cols", "lo": 1, "hi": 1025},
           {"name": "mid rows", "dim": "cols", "lo": 1025, "hi": 32769},
           {"name": "long rows", "dim": "cols", "lo": 32769}]


def bucketed_softmax(dest: Path) -> Path:
    """A copy of the softmax task with these buckets, the reference as default and e2e.py, whatever
    the built-in task.toml says about them (rewritten through tomllib/tomli_w, not by string edits)."""
    import tomli_w

    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    d = dest / "softmax_b"
    shutil.copytree(SOFTMAX, d, ignore=shutil.ignore_patterns("__pycache__"))
    toml = d / "task.toml"
    data = tomllib.loads(toml.read_text())
    data.update(default="reference:reference", e2e="e2e.py", buckets=BUCKETS)
    toml.write_text(tomli_w.dumps(data))
    return d


def shape_row(name, dims, cand, inc, correct=True, roofline=None):
    return {"name": name, "dims": dims, "long": dims.get("cols", 0) > 100000, "correct": correct, "error": None,
            "candidate_us": cand, "incumbent_us": inc, "speedup": (inc / cand) if cand and inc else None,
            "roofline_pct": roofline}


def verdict(shapes, accepted=True, stage="done", action="keep", reasons=(), violations=(), timing=True):
    import math

    sp = [s["speedup"] for s in shapes if s.get("speedup")]
    g = math.exp(sum(math.log(x) for x in sp) / len(sp)) if sp and timing else None
    return {"accepted": accepted, "stage": stage, "reasons": list(reasons), "violations": list(violations),
            "shapes": shapes, "geomean_speedup": g, "timing_available": timing,
            "recommendation": {"action": action, "reason": f"canned {action}", "can_keep": accepted}}


# GPU-shape verdict for the one-pass kernel: wins short and mid rows, loses long rows.
def partial_win():
    return verdict([
        shape_row("many short rows", {"rows": 65536, "cols": 512}, 20.0, 40.0, roofline=70),
        shape_row("4k x 4k", {"rows": 4096, "cols": 4096}, 30.0, 36.0, roofline=60),
        shape_row("vocab 32k", {"rows": 2048, "cols": 32768}, 70.0, 80.0, roofline=65),
        shape_row("long rows 128k", {"rows": 1024, "cols": 131072}, 900.0, 300.0, roofline=20),
    ], action="revert")

"""Pre-warmed children (harness/evaluate/prewarm.py) and cheap-first correctness (issue 18): the
next candidate's sandboxed process is started and warmed before it is needed, yet every candidate
still gets a process no other candidate ran in, and the spares end with the run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate, prewarm
from harness.authoring.tasks import load_task
from softmax_sources import WRONG

REPO = Path(__file__).resolve().parents[2]
# Right while a row fits in one block of 1024, wrong beyond (the tail of a long row is never written).
ONE_BLOCK = '''
import torch, triton, triton.language as tl
@triton.jit
def _row(x_ptr, y_ptr, cols, BLOCK: tl.constexpr):
    r = tl.program_id(0)
    i = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + r * cols + i, mask=i < cols, other=-float("inf")).to(tl.float32)
    e = tl.exp(x - tl.max(x, 0))
    tl.store(y_ptr + r * cols + i, (e / tl.sum(e, 0)).to(tl.bfloat16), mask=i < cols)
def softmax(x):
    y = torch.empty_like(x)
    _row[(x.shape[0],)](x, y, x.shape[1], BLOCK=1024)
    return y
'''


@pytest.fixture
def pool(monkeypatch):
    """A pool of its own, one spare deep, closed at the end (the process-wide one is left alone)."""
    monkeypatch.setenv(prewarm.ENV_DEPTH, "1")
    p = prewarm.Pool()
    monkeypatch.setattr(prewarm, "POOL", p)
    yield p
    p.close()


def _alive(child) -> bool:
    return child.proc.poll() is None


def test_a_prewarmed_child_serves_one_candidate_and_is_never_reused(pool, tmp_path):
    task = load_task("softmax")
    opts = EvalOptions(on_gpu=False, static=False, heldout=False, shapes=["short rows"])
    assert pool.warm(False, opts) == 1
    (spare,) = pool.spares()
    assert _alive(spare) and not spare.assigned

    first = evaluate(task, task.baseline_path, options=opts)
    assert first["accepted"], first["reasons"]
    assert first["child_start"]["prewarmed"] and first["child_startup_s"]["import_torch"] < 0.5
    assert not _alive(spare), "the spare that served the evaluation ended with it"
    (nxt,) = pool.spares()
    assert nxt is not spare and _alive(nxt) and not nxt.assigned, "a new, unused spare took its place"
    with pytest.raises(RuntimeError):  # a process that had a job never gets another
        spare.assign(task, opts)

    cand = tmp_path / "wrong.py"
    cand.write_text(WRONG)
    second = evaluate(task, cand, options=opts)  # a reject, then a keep: each in its own process
    assert not second["accepted"] and second["child_start"]["prewarmed"]
    assert not _alive(nxt) and nxt not in pool.spares()
    third = evaluate(task, task.baseline_path, options=opts)
    assert third["accepted"], third["reasons"]
    left = pool.spares()
    pool.close()
    assert left and not any(_alive(c) for c in left) and not pool.spares()


SCRIPT = r'''
import json, sys, time
from harness.evaluate import EvalOptions, prewarm
from harness.evaluate.sandbox import descendants
n = prewarm.warm(False, EvalOptions(on_gpu=False))
spares = prewarm.POOL.spares()
time.sleep(1.0)  # bwrap has started the sandboxed Python by now
pids = [c.proc.pid for c in spares] + [p for c in spares for p in descendants(c.proc.pid)]
print(json.dumps({"started": n, "pids": pids}), flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)
time.sleep(600)
'''


def _alive_not_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[-1][:1] != "Z"
    except OSError:  # gone between listing and reading (ProcessLookupError, FileNotFoundError)
        return False


def _gone(pids: list[int], within: float) -> list[int]:
    deadline = time.monotonic() + within
    while True:
        alive = [p for p in pids if _alive_not_zombie(p)]
        if not alive or time.monotonic() > deadline:
            return alive


@pytest.mark.parametrize("how", ["exit", "killed"])
def test_the_spares_end_with_the_run(how):
    """However the process that started them ends (a normal exit, or SIGKILL with no chance to
    clean up), no pre-warmed child outlives it."""
    env = dict(os.environ, PYTHONPATH=str(REPO), WARPSMITH_PREWARM="2")
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, how], cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    info = json.loads(p.stdout.readline())
    assert info["started"] == 2 and len(info["pids"]) >= 2
    if how == "killed":
        p.send_signal(signal.SIGKILL)
    p.wait(timeout=60)
    assert _gone(info["pids"], within=30) == []


def test_cheap_first_a_wrong_candidate_costs_only_the_smallest_shape(tmp_path):
    """Shapes run smallest first; after a wrong answer the larger ones are not run, and the verdict
    still lists every shape in the order asked, saying why the rest did not run."""
    task = load_task("softmax")
    cand = tmp_path / "wrong.py"
    cand.write_text(WRONG)
    opts = EvalOptions(on_gpu=False, static=False, shapes=["long row", "short rows"])
    v = evaluate(task, cand, options=opts)
    assert not v["accepted"] and v["stage"] == "correctness"
    assert [s["name"] for s in v["shapes"]] == ["long row", "short rows"]
    long_row, short = v["shapes"]
    assert not short["correct"] and short["error"] and not short["error"].startswith("not run")
    assert long_row["error"].startswith("not run: the candidate was already wrong on 'short rows'")
    assert all(r["message"].startswith("[short rows] ") for r in v["reasons"])


def test_cheap_first_still_runs_the_larger_shapes_while_the_small_ones_pass(tmp_path):
    """A kernel right on short rows and wrong on a long one: the small shapes pass, the long one
    runs and rejects it, as before."""
    task = load_task("softmax")
    cand = tmp_path / "one_block.py"
    cand.write_text(ONE_BLOCK)
    v = evaluate(task, cand, options=EvalOptions(on_gpu=False, static=False, heldout=False))
    assert not v["accepted"] and v["stage"] == "correctness"
    by = {s["name"]: s for s in v["shapes"]}
    assert by["short rows"]["correct"] and by["odd rows"]["correct"]
    assert not by["long row"]["correct"] and not by["long row"]["error"].startswith("not run")
    assert "incorrect" in {r["rule"] for r in v["reasons"]}
    assert all(r["message"].startswith("[long row] ") for r in v["reasons"])

"""Each documented cheat in candidates/ is rejected for the reason its docstring names; each honest
variant is accepted. CPU cheats run here in Triton's interpreter; `gpu` ones need CUDA (H200)."""
from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor

from pathlib import Path

import pytest
from redteam_catalog import CANARIES, SANDBOX_CHEATS, Cheat, all_cheats, assert_verdict, dsl_missing  # (this folder is on sys.path under pytest)

from harness.evaluate import EvalOptions, evaluate
from harness.authoring.tasks import load_task

REPO = Path(__file__).resolve().parents[2]


def task_copy(dst: Path, task: str = "softmax") -> Path:
    shutil.copytree(REPO / "kernels" / task, dst / task, ignore=shutil.ignore_patterns("__pycache__"))
    return dst / task


def hashes(task_dir: Path) -> dict:
    return load_task(task_dir).file_hashes()

CHEATS = all_cheats()
# Per-cheat options: tight limits where the cheat is about limits.
OPTIONS = {"hang": {"run_timeout_s": 5}, "slow_import": {"import_timeout_s": 5}, "host_oom": {"mem_cap_gb": 2.0, "run_timeout_s": 60},
           # 1.5 GiB in tmpfs files, past a 1 GiB cap: memory no RSS shows must still count
           "shm_stash": {"mem_cap_gb": 1.0}, "cache_hoard": {"mem_cap_gb": 1.0}}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _params():
    for c in CHEATS:
        if c.name in SANDBOX_CHEATS:  # evaluated and checked against the catalog in test_sandbox.py
            continue
        marks = [pytest.mark.gpu, pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")] if c.device == "gpu" else []
        missing = dsl_missing(c) if c.device == "gpu" else None
        if missing:  # (a CuTe DSL candidate where nvidia-cutlass-dsl is not installed)
            marks.append(pytest.mark.skip(reason=missing))
        if c.gap:  # strict: the day the harness catches it, the xfail fails and the Gap: line goes
            marks.append(pytest.mark.xfail(reason=f"known gap: {c.gap}", strict=True))
        yield pytest.param(c, id=c.name, marks=marks)


def test_catalog_is_big_enough():
    cheats = [c for c in CHEATS if c.expect != ["accepted"]]
    honest = [c for c in CHEATS if c.expect == ["accepted"]]
    assert len(cheats) >= 20 and len(honest) >= 3
    assert len({c.name for c in CHEATS}) == len(CHEATS)


WORKERS = 3  # each evaluation mostly waits on its child (imports, timeouts): overlap them


def _evaluate(cheat: Cheat, task_dir: Path) -> dict:
    task = load_task(task_dir)
    on_gpu = cheat.device == "gpu"
    opts = EvalOptions(on_gpu=on_gpu, shapes=cheat.shapes, static=cheat.full,
                       samples=20, **OPTIONS.get(cheat.name, {}))
    return evaluate(task, cheat.path, options=opts)


@pytest.fixture(scope="module")
def verdicts(request, tmp_path_factory):
    """Evaluate every selected cheat up front, a few at a time, with canary credentials planted in
    the parent's environment (none may reach candidate code)."""
    selected = [item.callspec.params["cheat"] for item in request.session.items
                if getattr(item, "callspec", None) and "cheat" in item.callspec.params]
    runnable = [c for c in selected if c.device == "cpu" or (_cuda() and not dsl_missing(c))]
    dirs = {c.name: task_copy(tmp_path_factory.mktemp(c.name), c.task) for c in runnable}  # one each: no crosstalk
    before = {name: hashes(d) for name, d in dirs.items()}
    saved = {k: os.environ.get(k) for k in CANARIES}
    os.environ.update(CANARIES)
    try:
        with ThreadPoolExecutor(WORKERS if not _cuda() else 1) as pool:  # one GPU: one at a time
            futures = {c.name: pool.submit(_evaluate, c, dirs[c.name]) for c in runnable}
            out = {name: f.result() for name, f in futures.items()}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out["_hashes_ok"] = all(hashes(d) == before[name] for name, d in dirs.items())
    return out


@pytest.mark.parametrize("cheat", list(_params()))
def test_verdict(cheat, verdicts):
    assert_verdict(cheat, verdicts[cheat.name])


def test_the_sandbox_cheats_are_catalog_cheats():
    """SANDBOX_CHEATS are checked in test_sandbox.py, not here: each is still a documented cheat of the catalog."""
    assert set(SANDBOX_CHEATS) <= {c.name for c in CHEATS if c.device == "cpu" and not c.gap}


def test_task_files_restored(verdicts):
    assert verdicts["_hashes_ok"], "a cheat's writes to task files must be undone after its run"

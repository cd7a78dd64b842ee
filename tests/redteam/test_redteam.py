"""Each documented cheat in candidates/ is rejected for the reason its docstring names; each honest
variant is accepted. CPU cheats run here in Triton's interpreter; `gpu` ones need CUDA (H200)."""
from __future__ import annotations

import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.evaluate import EvalOptions, evaluate

CANDIDATES = Path(__file__).resolve().parent / "candidates"


@dataclass
class Cheat:
    path: Path
    doc: str
    expect: list[str]
    device: str
    shapes: list[str]

    @property
    def name(self) -> str:
        return self.path.stem


def parse(path: Path) -> Cheat:
    text = path.read_text()
    doc = re.match(r'\s*"""(.*?)"""', text, re.S)
    assert doc, f"{path}: every red-team candidate starts with a docstring documenting the cheat"
    body = doc.group(1)

    def field(name: str, default: str | None = None) -> str:
        m = re.search(rf"^{name}:\s*(.+)$", body, re.M)
        if not m:
            assert default is not None, f"{path}: docstring needs a '{name}:' line"
            return default
        return m.group(1).strip()

    return Cheat(path, body, [e.strip() for e in field("Expect").split(",")], field("Device", "cpu"),
                 [s.strip() for s in field("Shapes", "odd rows").split(",")])


def all_cheats() -> list[Cheat]:
    return [parse(p) for p in sorted(CANDIDATES.glob("*.py")) if not p.name.startswith("_")]



CHEATS = all_cheats()
# Per-cheat options: tight limits where the cheat is about limits.
OPTIONS = {"hang": {"run_timeout_s": 5}, "host_oom": {"mem_cap_gb": 2.0, "run_timeout_s": 60}}


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _params():
    for c in CHEATS:
        marks = [pytest.mark.gpu, pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU")] if c.device == "gpu" else []
        yield pytest.param(c, id=c.name, marks=marks)


def test_catalog_is_big_enough():
    cheats = [c for c in CHEATS if c.expect != ["accepted"]]
    honest = [c for c in CHEATS if c.expect == ["accepted"]]
    assert len(cheats) >= 20 and len(honest) >= 3
    assert len({c.name for c in CHEATS}) == len(CHEATS)


CANARIES = {"ANTHROPIC_API_KEY": "WARPSMITH_CANARY_anthropic", "MY_SERVICE_TOKEN": "WARPSMITH_CANARY_token",
            "AWS_SECRET_ACCESS_KEY": "WARPSMITH_CANARY_aws"}
WORKERS = 3  # each evaluation mostly waits on its child (imports, timeouts): overlap them


def _evaluate(cheat: Cheat, task) -> dict:
    on_gpu = cheat.device == "gpu"
    opts = EvalOptions(on_gpu=on_gpu, shapes=None if on_gpu else cheat.shapes, static=False,
                       samples=20, **OPTIONS.get(cheat.name, {}))
    return evaluate(task, cheat.path, options=opts)


@pytest.fixture(scope="module")
def verdicts(request, task_copy):
    """Evaluate every selected cheat up front, a few at a time, with canary credentials planted in
    the parent's environment (none may reach candidate code)."""
    selected = [item.callspec.params["cheat"] for item in request.session.items
                if getattr(item, "callspec", None) and "cheat" in item.callspec.params]
    runnable = [c for c in selected if c.device == "cpu" or _cuda()]
    before = task_copy.file_hashes()
    saved = {k: os.environ.get(k) for k in CANARIES}
    os.environ.update(CANARIES)
    try:
        with ThreadPoolExecutor(WORKERS if not _cuda() else 1) as pool:  # one GPU: one at a time
            futures = {c.name: pool.submit(_evaluate, c, task_copy) for c in runnable}
            out = {name: f.result() for name, f in futures.items()}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out["_hashes_ok"] = task_copy.file_hashes() == before
    return out


@pytest.mark.parametrize("cheat", list(_params()))
def test_verdict(cheat, verdicts):
    v = verdicts[cheat.name]
    rules = {r["rule"] for r in v["reasons"]}
    detail = "\n".join(f"{r['rule']}: {r['message'][:300]}" for r in v["reasons"]) + "\n" + v.get("output", "")[-2000:]
    if cheat.expect == ["accepted"]:
        assert v["accepted"], f"honest variant {cheat.name} was rejected:\n{detail}"
        assert v["stage"] == "done" and all(s["correct"] for s in v["shapes"])
    else:
        assert not v["accepted"], f"cheat {cheat.name} was accepted"
        if cheat.name == "host_oom":  # how a memory cap fires is platform-dependent: either reason
            assert rules & set(cheat.expect), detail
        else:
            missing = [e for e in cheat.expect if e not in rules]
            assert not missing, f"{cheat.name}: expected {cheat.expect}, got {sorted(rules)}\n{detail}"
        assert v["recommendation"]["can_keep"] is False and v["recommendation"]["action"] == "revert"
    assert "WARPSMITH_CANARY" not in repr(v)


def test_task_files_restored(verdicts):
    assert verdicts["_hashes_ok"], "a cheat's writes to task files must be undone after its run"

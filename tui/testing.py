"""Deterministic apps for Pilot tests, snapshots, the latency benchmark and the README screenshot.

A fixed session id, a scripted agent (prepared candidates, reasoning streamed from .md files)
and canned verdicts instead of the evaluator: same Loop, same journal, same git workspace.
Set GIT_AUTHOR_DATE / GIT_COMMITTER_DATE (see `FIXED_GIT_DATES`) for stable commit ids.
"""
from __future__ import annotations

import functools
import io
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterable

from rich.console import Console

from harness import events as ev
from harness.agents.script import ScriptAgent
from harness.evaluate.records import Verdict
from harness.loop import Decider, DecisionRequest, Loop
from harness.authoring.packs import Catalog, load_pack
from harness.sessions.session import Session, SessionMeta, sessions_root
from harness.authoring.tasks import Task, load_task
from harness.wiring import RunConfig
from harness.sessions.workspace import Workspace, unified_diff
from tui.app import DecisionRequested, LoopEvent, WarpsmithApp
from tui.widgets.bench import BenchPane
from tui.widgets.reasoning import ReasoningPane

SESSION_ID = "20260101-000000-softmax-demo"
DEVICE = "cpu (Triton interpreter)"
FIXED_GIT_DATES = {"GIT_AUTHOR_DATE": "2026-01-01T00:00:00+0000",
                   "GIT_COMMITTER_DATE": "2026-01-01T00:00:00+0000"}

REASONING = [
    "## Where the time goes\n\nThe baseline runs **one program per row** and makes two passes over "
    "HBM: an online `(max, sum)` pass, then a normalising pass. With `BLOCK = 1024` the long rows "
    "(131072 columns) loop 128 times per pass.\n\n- wider blocks cut loop trips on long rows\n"
    "- short rows waste lanes when `BLOCK` is far above `n_cols`\n\nTrying `BLOCK = 2048` with "
    "`num_warps = 8` so each warp still owns 256 elements.\n",
    "## Second try\n\nThe wider block helped long rows only. Short rows (512 columns) now mask off "
    "three quarters of each load. Going back to `BLOCK = 1024` but with `num_warps = 2` to free "
    "registers for more programs in flight.\n",
    "## Third try\n\nPersistent programs are out of scope for the tuner; this one cheats on purpose: "
    "it calls `torch.softmax` so the rules must catch it.\n",
]


def _variant(base: str, block: int, warps: int, doc: str) -> str:
    src = re.sub(r"^BLOCK = \d+$", f"BLOCK = {block}", base, flags=re.M)
    src = src.replace("num_warps=4", f"num_warps={warps}")
    return f'"""{doc}"""\n' + src.split('"""', 2)[2].lstrip("\n")


def make_script_dir(folder: Path, task: Task) -> Path:
    """Three candidates: a wider block, fewer warps, and a torch fallback that breaks a rule."""
    folder.mkdir(parents=True, exist_ok=True)
    base = task.baseline_path.read_text()
    (folder / "01_block2048.py").write_text(_variant(base, 2048, 8, "BLOCK 2048, 8 warps"))
    (folder / "02_warps2.py").write_text(_variant(base, 1024, 2, "BLOCK 1024, 2 warps"))
    cheat = base.replace("    return y\n", "    return torch.softmax(x.float(), -1).to(x.dtype)\n")
    (folder / "03_torch_fallback.py").write_text(_variant(cheat, 1024, 4, "torch fallback"))
    for i, text in enumerate(REASONING, 1):
        name = sorted(folder.glob(f"{i:02d}_*.py"))[0].with_suffix(".md")
        name.write_text(text)
    return folder


def shape_results(task: Task, timing: bool, speedup: float = 1.0, correct: bool = True) -> list[dict]:
    out = []
    for i, s in enumerate(task.shapes_for(on_gpu=timing)):
        row = {"name": s.name, "correct": correct}
        if timing:
            inc = 100.0 + 25.0 * i
            row.update(incumbent_us=inc, candidate_us=inc / speedup, speedup=speedup, noise_pct=1.5 + 0.5 * i,
                       roofline_pct=round(40 + 10 * i * speedup))
        out.append(row)
    return out


def verdict(task: Task, *, accepted: bool = True, stage: str = "done", timing: bool = False,
            speedup: float = 1.0, action: str | None = None, can_keep: bool | None = None,
            reasons: list[dict] | None = None, violations: list[dict] | None = None) -> dict:
    """A verdict dict shaped like the evaluator's, with its recommendation."""
    correct = stage not in ("correctness",)
    can_keep = accepted if can_keep is None else can_keep
    if action is None:
        action = "keep" if accepted and timing and speedup > 1.0 else "revert"
    if not accepted:
        reason = (reasons or [{"message": stage}])[0].get("message", stage)
    elif not timing:
        reason = "correct, but no timing on this machine (interpreter): nothing shows it is faster"
    else:
        reason = f"geomean speedup {speedup:.3f}x" + ("" if speedup > 1 else ": not faster")
    return {
        "accepted": accepted, "stage": stage, "reasons": list(reasons or []),
        "violations": list(violations or []), "timing_available": timing,
        "geomean_speedup": speedup if timing and accepted else None,
        "shapes": shape_results(task, timing, speedup, correct) if stage not in ("static", "import") else [],
        "recommendation": {"action": action, "reason": reason, "can_keep": can_keep},
    }


def default_verdicts(task: Task) -> list[dict]:
    return [
        verdict(task, timing=True, speedup=1.18),  # 1: faster: recommend keep
        verdict(task, timing=True, speedup=0.97),  # 2: correct, slower: recommend revert, keepable
        verdict(task, accepted=False, stage="static", can_keep=False,
                reasons=[{"rule": "no-torch-fallback", "message": "calls torch.softmax instead of a kernel"}],
                violations=[{"rule": "no-torch-fallback", "message": "torch.softmax computes the answer",
                             "line": 38, "col": 11, "snippet": "torch.softmax(x.float(), -1)"}]),
    ]


def make_session(base: Path, task: Task, sid: str = SESSION_ID, agent: str = "script") -> Session:
    root = sessions_root(base) / sid
    root.mkdir(parents=True)
    Workspace.create(root / "repo", task.baseline_path.read_text())
    session = Session(root, SessionMeta(sid, task.name, agent, 0.0, ["h200", "reward-hacks"]))
    session.save_meta()
    return session


class CannedEvaluate:
    """Returns prepared verdicts in order (the last one repeats); records what it was asked."""

    def __init__(self, verdicts: list[dict], delay_s: float = 0.0):
        self.verdicts, self.delay_s = verdicts, delay_s
        self.calls: list[Path] = []

    def __call__(self, task: Task, candidate: Path, incumbent: Path) -> dict:
        self.calls.append(candidate)
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.verdicts[min(len(self.calls), len(self.verdicts)) - 1]


@functools.lru_cache(maxsize=None)
def softmax_task() -> Task:
    return load_task("softmax")  # imports torch via the reference: once per process


def make_app(base: Path, *, verdicts: list[dict] | None = None, key_guard_s: float = 0.0,
             clock: Callable[[], float] = time.monotonic, chunk_delay_s: float = 0.0, chunk_chars: int = 120,
             eval_delay_s: float = 0.0, iterations: int = 3, auto: bool = False, start_loop: bool = True,
             session: Session | None = None, resumed: bool = False, bell: bool = False,
             script_dir: Path | None = None, agent_factory: Callable[[Path], object] | None = None
             ) -> WarpsmithApp:
    task = softmax_task()
    session = session or make_session(base, task)
    script = script_dir or make_script_dir(base / "script", task)
    evaluate = CannedEvaluate(verdicts if verdicts is not None else default_verdicts(task), eval_delay_s)
    cfg = RunConfig(agent=f"script:{script}", iterations=iterations, auto=auto)

    def factory(decider: Decider, emit: Callable[[ev.Event], None]) -> Loop:
        agent = (agent_factory(script) if agent_factory is not None else
                 ScriptAgent(script, chunk_delay_s=chunk_delay_s, chunk_chars=chunk_chars))
        loop = Loop(session, task, agent, decider, evaluate, emit=emit, max_iterations=iterations)
        loop.emit(ev.SessionStarted(session.id, task.name, f"script:{agent.model}", [], DEVICE, resumed,
                                    "auto" if auto else "manual"))
        return loop

    app = WarpsmithApp(task, session, cfg, loop_factory=factory, key_guard_s=key_guard_s, clock=clock,
                       bell=bell, start_loop=start_loop, resumed=resumed)
    app.canned_evaluate = evaluate  # type: ignore[attr-defined]
    return app


def demo_events(task: Task, source_old: str, source_new: str, upto: str = "stream") -> list[ev.Event]:
    """A fixed event sequence for snapshots: iteration 1 kept, iteration 2 mid-stream or deciding (the
    canned verdicts, dicts as an evaluator hands them over, read as the loop reads them)."""
    v1 = verdict(task, timing=True, speedup=1.18)
    v2 = verdict(task, timing=True, speedup=0.97)
    out: list[ev.Event] = [
        ev.SessionStarted(SESSION_ID, task.name, "script:demo", [], "NVIDIA H200", False, "manual"),
        ev.IterationStarted(1), ev.Reasoning(1, REASONING[0]),
        ev.Usage(1, 5210, 830, 4096, 512, 0.0213, 0.0213),
        ev.CandidateProposed(1, "a1b2c3d4e5f60718", "BLOCK 2048, 8 warps", unified_diff(source_old, source_new),
                             source_new, "script", "demo", "0000baseline"),
        ev.StaticResult(1, True), ev.EvalStarted(1), ev.EvalResult(1, Verdict.from_json(v1)),
        ev.Recommendation(1, "keep", v1["recommendation"]["reason"], True), ev.DecisionNeeded(1),
        ev.Decision(1, "keep", "human", False, "", "a1b2c3d4e5f60718", "a1b2c3d4e5f60718"),
        ev.IdeasChanged(["the 32k chunk loads are serial: pipeline them"]),
        ev.IterationStarted(2), ev.Reasoning(2, REASONING[1][: len(REASONING[1]) // 2]),
    ]
    if upto == "decide":
        third = _variant(source_old, 1024, 2, "BLOCK 1024, 2 warps")
        out += [ev.Reasoning(2, REASONING[1][len(REASONING[1]) // 2:]),
                ev.Usage(2, 5400, 610, 5000, 300, 0.0187, 0.04),
                ev.CandidateProposed(2, "b2c3d4e5f6071829", "BLOCK 1024, 2 warps",
                                     unified_diff(source_new, third), third, "script", "demo",
                                     "a1b2c3d4e5f60718"),
                ev.StaticResult(2, True), ev.EvalStarted(2), ev.EvalResult(2, Verdict.from_json(v2)),
                ev.Recommendation(2, "revert", v2["recommendation"]["reason"], True), ev.DecisionNeeded(2)]
    return out


def demo_sources(task: Task) -> tuple[str, str]:
    base = task.baseline_path.read_text()
    return base, _variant(base, 2048, 8, "BLOCK 2048, 8 warps")


def static_app(base: Path, upto: str = "stream", **kw) -> WarpsmithApp:
    """An app that runs no loop: the test feeds `demo_events` (see `feed`)."""
    return make_app(base, start_loop=False, **kw)


async def feed(app: WarpsmithApp, events: Iterable[ev.Event], olds: dict[int, str]) -> None:
    """Apply events on the UI thread as the loop thread's messages would, then render them fully.
    `olds`: the incumbent source of each iteration's candidate."""
    for e in events:
        await app.on_loop_event(LoopEvent(e, olds.get(e.iteration) if isinstance(e, ev.CandidateProposed) else None))
    await app.run_screen.query_one(ReasoningPane).flush()


def screen_text(app: WarpsmithApp) -> str:
    """The current screen as plain text (what a person would read), for tests and debugging."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", record=True, legacy_windows=False, safe_box=False)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def present_decision(app: WarpsmithApp, events: list[ev.Event]) -> None:
    """Open the decision prompt for the last candidate in `events` without a loop thread
    (snapshots): what TuiDecider.decide does before it blocks."""
    cand = [e for e in events if isinstance(e, ev.CandidateProposed)][-1]
    rec = [e for e in events if isinstance(e, ev.Recommendation)][-1]
    verdict_ = [e for e in events if isinstance(e, ev.EvalResult)][-1].verdict
    req = DecisionRequest(cand.iteration, cand.commit, cand.description, verdict_, rec.action, rec.reason,
                          rec.can_keep)
    app.decider.open_without_waiting(req)
    app.post_message(DecisionRequested(req))


DEMO_PACKS = {
    "hardware/h200": ('id = "h200"\nkind = "hardware"\ntitle = "NVIDIA H200 (Hopper, sm_90a)"\n'
                      'version = "1.0.0"\nfiles = ["overview.md"]\n',
                      "# H200\n\n132 SMs, 141 GB HBM3e at 4.8 TB/s, 50 MB L2. TMA and WGMMA.\n"),
    "hardware/b200": ('id = "b200"\nkind = "hardware"\ntitle = "NVIDIA B200 (Blackwell, sm_100a)"\n'
                      'version = "1.0.0"\nfiles = ["overview.md"]\n',
                      "# B200\n\ntcgen05 MMA, tensor memory, 2-CTA pairs.\n"),
    "models/deepseek-v4": ('id = "deepseek-v4"\nkind = "model"\ntitle = "DeepSeek V4 attention"\n'
                           'version = "0.1.0"\nfiles = ["attention.md"]\n',
                           "# DeepSeek V4\n\nCompressed sparse attention with an indexer.\n"),
    "rules/reward-hacks": ('id = "reward-hacks"\nkind = "rules"\ntitle = "Reward hacks"\nversion = "1.0.0"\n'
                           'files = ["rules.md"]\n',
                           "# Forbidden\n\nNo torch fallbacks, no cached outputs.\n"),
}


def demo_catalog(folder: Path):
    """A small fixed pack catalog (snapshots must not change when the built-in packs do)."""
    cat = Catalog()
    for rel, (toml, md) in DEMO_PACKS.items():
        d = folder / rel
        d.mkdir(parents=True, exist_ok=True)
        # The h200's datasheet bandwidth: the bench's roofline column (nvidia.com/en-us/data-center/h200).
        specs = '[specs]\nhbm_tb_s = 4.8\n' if rel == "hardware/h200" else ""
        (d / "pack.toml").write_text(toml + 'sources = ["demo pack for tests"]\n' + specs)
        name = toml.split('files = ["')[1].split('"')[0]
        (d / name).write_text(md)
        p = load_pack(d, "builtin")
        cat.packs[p.id] = p
    return cat


async def _screenshot(path: Path, size: tuple[int, int]) -> None:
    """The README screenshot: the decision prompt of the demo session (fixed events, fixed ids)."""
    os.environ.update(FIXED_GIT_DATES)
    task = softmax_task()
    old, new = demo_sources(task)
    events = demo_events(task, old, new, "decide")
    app = static_app(Path(tempfile.mkdtemp(prefix="warpsmith-shot-")))
    async with app.run_test(size=size) as pilot:
        await feed(app, events, {1: old, 2: new})
        present_decision(app, events)
        bench = app.run_screen.query_one(BenchPane)
        while app.decider.shown_at is None or not bench.roof_ready:  # the roof column: worked out on a thread
            await pilot.pause(0.02)
        await pilot.pause()
        path.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=path.name, path=str(path.parent))


if __name__ == "__main__":
    import argparse
    import asyncio

    ap = argparse.ArgumentParser(description="write the README screenshot (SVG) from the demo session")
    ap.add_argument("output", nargs="?", default="docs/screenshot.svg")
    ap.add_argument("--size", default="160x44")
    a = ap.parse_args()
    w, h = (int(x) for x in a.size.split("x"))
    asyncio.run(_screenshot(Path(a.output), (w, h)))
    print(a.output)

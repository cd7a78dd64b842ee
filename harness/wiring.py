"""Builds a Loop from options: agent, evaluator backend, packs and prompt, decider, printer.

The one assembly path: the headless CLI (warpsmith/commands/run.py) and the TUI (tui/app.py) each bring
only their decider and their event sink to `build_loop`, so every option means the same in both
(tests/spine/test_assembly.py runs the option matrix through both).
"""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from harness import events as ev
from harness.model.dispatch import KeepBucketsDecider
from harness.model.e2e import apply_e2e, run_e2e_check
from harness.evaluate import EvalOptions
from harness.evaluate.backends import make_evaluator
from harness.evaluate.records import Verdict
from harness.loop import Decider, Loop
from harness.authoring.packs import (Catalog, HardwareChoice, Pack, PackError, PackWatcher, Selection, discover,
                           session_selection)
from harness.prompt import SessionPrompt
from harness.sessions.session import Session
from harness.authoring.tasks import Task


@dataclass
class RunConfig:
    agent: str = "tuner"
    iterations: int = 20
    auto: bool = False
    packs_add: list[str] = field(default_factory=list)
    packs_remove: list[str] = field(default_factory=list)
    ideas: list[str] = field(default_factory=list)
    eval_backend: str = "local"
    proposals: int = 1
    budget_usd: float | None = None
    no_mouse: bool = False
    quiet: bool = False
    keep_buckets: str = "off"  # off | auto: keep a losing candidate for the buckets where it wins
    timeout_s: float | None = None  # per-call limit (--timeout); None: the task's (harness.authoring.tasks)

    @classmethod
    def from_args(cls, a: argparse.Namespace) -> "RunConfig":
        split = lambda s: [x.strip() for x in (s or "").split(",") if x.strip()]
        return cls(agent=a.agent, iterations=a.iterations, auto=a.auto, packs_add=split(a.packs),
                   packs_remove=split(a.no_packs), ideas=list(a.idea), eval_backend=a.eval_backend,
                   proposals=a.proposals, budget_usd=a.budget_usd, no_mouse=a.no_mouse, quiet=a.quiet,
                   keep_buckets=getattr(a, "keep_buckets", "off"), timeout_s=getattr(a, "timeout", None))

    def to_dict(self) -> dict:
        return asdict(self)


def device_label() -> str:
    try:
        import torch  # (seconds to import: only when the label is asked for)

        if torch.cuda.is_available():
            return torch.cuda.get_device_name(0)
    except Exception:  # a broken torch install must not stop the harness from saying so
        pass
    return "cpu (Triton interpreter)"


def start_session(task: Task, cfg: RunConfig, base: Path | None = None) -> Session:
    session = Session.create(task.name, cfg.agent, task.baseline_path.read_text(), base=base,
                             options=cfg.to_dict())
    if cfg.ideas:
        session.meta.ideas = list(cfg.ideas)
        session.save_meta()
    return session


def make_agent(spec: str, session: Session | None = None, cfg: RunConfig | None = None):
    # The registry brings httpx2 (~50 ms), which the TUI's start (it imports this module) doesn't need.
    from harness.agents.registry import make_agent as registry_make

    opts = {}
    if session is not None:
        opts["transcript_dir"] = session.transcripts
        opts["session_dir"] = session.root
    if cfg is not None and cfg.budget_usd is not None:
        opts["budget_usd"] = cfg.budget_usd
    return registry_make(spec, **opts)


def enforced_rules(session: Session, task: Task, catalog) -> list[str]:
    """The rules packs the session selected beyond the task's own, as the catalog's folders: a
    rules pack a person adds is enforced by the evaluator, not only shown to the agent. (The
    task's own are always enforced; taking them out of the prompt doesn't change that.)"""
    own = set(task.enforced_rules_packs)
    picked = (catalog.packs.get(i) for i in session.meta.packs if i not in own)
    return [str(p.path) for p in picked if p is not None and p.kind == "rules"]


def e2e_gate(task: Task, v: Verdict, candidate: Path, incumbent: Path) -> Verdict:
    """A kernel that wins alone must win in the task's end-to-end workload too (task.toml `e2e`)
    before it can be kept: run on every verdict that recommends a keep (Loop.check_verdict)."""
    if task.e2e and v.timing_available and v.recommended is not None and v.recommended.action == "keep":
        # harness.model.e2e folds its result into the verdict's JSON object, as the evaluator's stages build it
        e2e = run_e2e_check(task, candidate, incumbent, kernel_speedup=v.geomean_speedup)
        return Verdict.from_json(apply_e2e(v.to_json(), e2e))
    return v


@dataclass
class SessionPacks:
    """The packs a run starts with, and what to say about them."""

    catalog: Catalog
    selection: Selection
    notes: list[str]  # why each pack is in or out, for a person to read
    hardware: HardwareChoice | None  # the hardware pack for this GPU and why; None: none was chosen (a resume)
    errors: list[str] = field(default_factory=list)  # packs that failed to load

    def packs(self) -> list[Pack]:
        return self.selection.resolve(self.catalog)


def select_packs(session: Session, task: Task, cfg: RunConfig, resumed: bool) -> SessionPacks:
    """The session's packs. On resume: the last selection in the journal (PacksSelected: the one
    the session started with, or the person's last pick), as it stands; the start's --pack and
    --no-pack flags (kept in the session's options) are in it already, and applying them again
    would undo a pick. Else: defaults for task and GPU, then the flags. Journalled when it changes."""
    chosen = resolve_packs(task, cfg, session if resumed else None)
    if chosen.selection.ids != session.journalled_packs():
        session.set_packs(chosen.selection.ids)
    return chosen


def resolve_packs(task: Task, cfg: RunConfig, session: Session | None = None) -> SessionPacks:
    """The packs of a new run (session None) or a resumed one, with every pack loaded: a selected
    id whose winning copy is broken (a user's pack over a built-in one) raises ValueError naming its
    file and line, instead of the lower-precedence copy being used. Nothing is journalled:
    `warpsmith run` calls this before it makes a session folder."""
    catalog = discover()
    saved, add, remove = None, cfg.packs_add, cfg.packs_remove
    if session is not None:
        journalled = session.journalled_packs()
        recorded = journalled if journalled is not None else session.legacy_packs()
        if recorded is not None:
            saved, add, remove = Selection(recorded), [], []
    try:
        sel, notes, hardware = session_selection(task, catalog, add, remove, saved)
        sel.resolve(catalog)
    except PackError as e:  # before KeyError: a broken pack is not an unknown one
        raise ValueError(str(e)) from None
    except KeyError as e:
        # A pack that exists but failed to load is "unknown" to the catalog: say why it failed.
        named = [*add, *remove, *(saved.ids if saved is not None else [])]
        why = [str(err) for err in catalog.errors
               if any(getattr(err, "pack_id", None) == i or Path(err.path).parent.name == i for i in named)]
        raise ValueError("; ".join([str(e).strip("'\""), *why])) from None
    return SessionPacks(catalog, sel, notes, hardware, [str(e) for e in catalog.errors])


def wrap_decider(decider: Decider, task: Task, cfg: RunConfig, session: Session) -> Decider:
    """The front end's decider (a person at the TUI or stdin, or --auto) with what the options add
    around it, the same for every front end: --keep-buckets auto keeps a candidate that loses overall
    for the buckets where it wins."""
    if cfg.keep_buckets == "auto":
        decider = KeepBucketsDecider(decider, task, session=session)
    return decider


def build_loop(session: Session, task: Task, cfg: RunConfig, decider: Decider,
               emit: Callable[[ev.Event], None], resumed: bool = False) -> Loop:
    agent = make_agent(cfg.agent, session, cfg)
    chosen = select_packs(session, task, cfg, resumed)
    packs = chosen.packs()
    decider = wrap_decider(decider, task, cfg, session)
    # Where candidates are evaluated (here, a pool of GPUs, a Ray cluster); with --proposals 1 on
    # one worker, one candidate at a time.
    evaluator = make_evaluator(cfg.eval_backend, log_dir=session.root / "workers")
    device = device_label()
    on_gpu = device != "cpu (Triton interpreter)"
    loop = Loop(session, task, agent, decider, evaluator, emit=emit, max_iterations=cfg.iterations,
                budget=getattr(agent, "budget", None), proposals=cfg.proposals,
                options=lambda: EvalOptions(extra_rules=enforced_rules(session, task, chosen.catalog),
                                            run_timeout_s=cfg.timeout_s),
                # The packs the session starts with are in SessionStarted: the first prompt needn't say them again.
                announced_packs=[{**p.provenance(), "cut_files": []} for p in packs])
    loop.check_verdict = e2e_gate  # (a second loop for --proposals N once skipped it)
    watcher = PackWatcher(packs, callback=lambda pid, ok, msg: loop.emit(ev.PackReloaded(pid, ok, msg)))
    loop.call_timeout_s = cfg.timeout_s or task.call_timeout_for(on_gpu)  # what EvalOptions resolves to
    loop.prompt_builder = SessionPrompt(session, task, chosen.catalog, watcher, emit=loop.emit, on_gpu=on_gpu,
                                        reads_prompt=lambda: getattr(loop.agent, "reads_prompt", True))
    watcher.start()
    loop.closers.append(watcher.stop)
    loop.emit(ev.SessionStarted(session.id, task.name, f"{agent.name}{':' + agent.model if agent.model else ''}",
                                [p.provenance() for p in packs], device, resumed,
                                "auto" if cfg.auto else "manual"))
    if chosen.hardware is not None:
        loop.emit(ev.HardwarePackChosen(chosen.hardware.pack_id, chosen.hardware.reason), journal=False)
    for note in chosen.notes:
        loop.emit(ev.AgentNotice(0, "info", note), journal=False)
    for err in chosen.errors:
        loop.emit(ev.AgentNotice(0, "warning", f"pack not loaded: {err}"))
    return loop

"""The parent side of an evaluation: spawn the child, drive it, judge what comes back.

The parent never imports candidate code. It generates every input from a secret per-run seed,
computes the reference on its own copy, and compares; the child only runs the candidate and
reports raw outputs plus what its guards saw. Stages, cheap first: static -> import ->
correctness -> guard -> timing. The verdict is a plain dict (see DESIGN.md, "Verdict").
"""
from __future__ import annotations

import hashlib
import secrets
import time
from dataclasses import asdict, is_dataclass, replace
from pathlib import Path
from typing import Any

from harness.evaluate import guards, prewarm, sandbox, trace
from harness.evaluate import verdict as vd
from harness.evaluate.process import ChildFailed, EvalOptions, _Run
# Re-exported: callers (benches, e2e, profile, tests) have imported these from here.
from harness.evaluate.process import REPO_ROOT, ChildProcess, derive_seed, scrubbed_env  # noqa: F401
from harness.evaluate.prewarm import close as close_spares  # noqa: F401
from harness.authoring.tasks import Shape, Task, TaskError

# Local imports below are for start-up time: this module loads with every `warpsmith` command (and the TUI),
# so torch, harness.guard (tree-sitter; optional on a bare GPU box) and the stage modules (correctness,
# heldout, timing_stage, keep_policy, dsl_support) are imported when an evaluation needs them.


def _violation_dict(v: Any) -> dict:
    if is_dataclass(v) and not isinstance(v, type):
        d = asdict(v)
    elif isinstance(v, dict):
        d = dict(v)
    else:
        d = {k: getattr(v, k, None) for k in ("rule", "message", "line", "col", "snippet", "severity")}
    return d


def run_static(task: Task, source: bytes | str, extra_rules: list[str] = ()) -> tuple[list[dict] | None, str]:
    """The static stage (harness.guard). (None, why and what to do) when it can't run here: the guard
    not importable, or a rules pack that doesn't load."""
    try:  # tree-sitter (~40 ms; maybe absent on a bare GPU box): the note above the functions
        from harness.guard import check_source, rules_for_task  # type: ignore[attr-defined]
    except Exception as e:  # noqa: BLE001 - e.g. tree_sitter missing on a bare GPU box
        return None, (f"static stage skipped: harness.guard.check_source unavailable ({type(e).__name__}: {e}); "
                      "install warpsmith's dependencies (tree-sitter, tree-sitter-python)")
    try:
        found = check_source(source, task, rules_for_task(task, extra=extra_rules))
    except Exception as e:  # noqa: BLE001 - e.g. a rules pack the task names is missing
        # The runtime guards still run; the verdict says loudly that this stage did not.
        return None, f"static stage could not run: {type(e).__name__}: {e}; fix or deselect the rules pack it names"
    return [_violation_dict(v) for v in found], ""


def _on_gpu(opts: EvalOptions) -> bool:
    if opts.on_gpu is not None:
        return opts.on_gpu
    import torch  # (start-up: the note above the functions)

    return bool(torch.cuda.is_available())


def _select_shapes(task: Task, on_gpu: bool, names: list[str] | None) -> list[Shape]:
    shapes = task.shapes_for(on_gpu)
    if not names:
        return shapes
    by = {s.name: s for s in task.shapes + task.interpreter_shapes}
    missing = [n for n in names if n not in by]
    if missing:
        raise TaskError(task.toml_path, "shapes", f"no shape named {', '.join(map(repr, missing))} "
                                                  f"(known: {', '.join(by)})")
    return [by[n] for n in names]


def evaluate(task: Task, candidate: Path, incumbent: Path | None = None,
             options: EvalOptions | None = None) -> dict:
    opts = options or EvalOptions()
    t0 = time.monotonic()
    candidate = Path(candidate).resolve()
    if not candidate.is_file():
        raise FileNotFoundError(f"{candidate}: no such candidate file")
    incumbent = Path(incumbent).resolve() if incumbent else task.baseline_path.resolve()
    if not incumbent.is_file():
        raise FileNotFoundError(f"{incumbent}: no such incumbent file")
    on_gpu = _on_gpu(opts)
    # Resolved once for every stage: the parent clock read opts.on_gpu, and with the default (None,
    # "auto") every real evaluation timed eager, host-bound batches of 5-7 calls on the H200 while
    # the A/A bench, which sets it, timed CUDA-graph batches.
    opts = replace(opts, on_gpu=on_gpu)
    if opts.run_timeout_s is None:
        opts = replace(opts, run_timeout_s=task.call_timeout_for(on_gpu))
    shapes = _select_shapes(task, on_gpu, opts.shapes)
    # Read once: the static stage parses these bytes and the child compiles exactly them (it checks
    # their sha256 before any of it runs), decoded as UTF-8 by both (harness/sourcefile.py).
    source = candidate.read_bytes()
    run = _Run(task, candidate)
    v: dict[str, Any] = {
        "accepted": False, "stage": "static", "reasons": run.reasons, "task": task.name,
        "candidate": str(candidate), "incumbent": str(incumbent),
        "candidate_sha256": hashlib.sha256(source).hexdigest(),
        "device": "cpu (Triton interpreter)", "timing_available": False, "shapes": run.shapes,
        "geomean_speedup": None, "noise_band_pct": None, "recommendation": None, "wall_s": 0.0,
        "violations": [], "notes": run.notes, "output": "", "sandbox": bool(opts.sandbox),
        "call_timeout_s": opts.run_timeout_s, "heldout": [], "hard_cases": [], "contract": [],
    }
    if opts.sandbox:
        works, why, _ = sandbox.probe()
        if not works:
            # Fail closed: candidate code never runs unconfined unless someone said so.
            run.reject("import", "sandbox-unavailable", why)
            return _finish(v, run, t0, timing_available=False)
    else:
        run.notes.append("sandbox off (--no-sandbox): candidate code ran with this user's privileges, files "
                         "and network")

    if opts.static:
        violations, why = run_static(task, source, opts.extra_rules)
        if violations is None:
            # Fail closed: a verdict without the static stage would accept what the rules forbid.
            run.reject("static", "static-unavailable",
                       f"{why}, or pass static=False / --no-static to evaluate without static checks, knowingly")
            return _finish(v, run, t0, timing_available=False)
        v["violations"] = violations
        errors = [viol for viol in violations if viol.get("severity", "error") == "error"]
        for viol in errors:
            msg, line = str(viol.get("message")), viol.get("line")
            where = f" (line {line})" if line and f"line {line}" not in msg else ""  # (unless it says so)
            run.reject("static", f"static:{viol.get('rule')}", msg + where)
        for viol in violations:
            if viol not in errors:  # warnings go to the agent and the person, not into the decision
                run.notes.append(vd.static_warning_note(viol))
        if errors:
            return _finish(v, run, t0, timing_available=False)

    from harness.authoring.dsl_support import dsl_problem  # (start-up: the note above the functions)

    problem = dsl_problem(task, on_gpu)
    if problem:  # no child could run it (warpsmith eval says so before it gets here, exit 2)
        run.reject("import", "dsl-unavailable", problem)
        return _finish(v, run, t0, timing_available=False)

    hashes = task.file_hashes()
    saved = {p: (task.root / p).read_bytes() for p in hashes}
    run.stage = "done"
    secret = opts.seed if opts.seed is not None else secrets.randbits(63)
    timing_available = False
    try:
        timing_available = _evaluate_in_child(run, v, task, candidate, incumbent, shapes, on_gpu, opts, secret)
    finally:
        after = task.file_hashes()
        changed = sorted(p for p in set(hashes) | set(after) if hashes.get(p) != after.get(p))
        if changed:
            run.reject(run.stage if run.stage != "done" else "guard", "task-files-unchanged",
                       f"task files changed during the run: {', '.join(changed)} (restored from the copy "
                       "taken before the run)")
            _restore(task.root, saved, after)
    from harness.evaluate import keep_policy  # (start-up: the note above the functions)

    return keep_policy.apply(_partial(_finish(v, run, t0, timing_available), task, on_gpu, shapes), task,
                             heldout_checked=opts.heldout)


def _partial(v: dict, task: Task, on_gpu: bool, shapes: list[Shape]) -> dict:
    """A verdict on a subset of the shapes (eval --shapes, for debugging) says so and is never a
    keep: a candidate can win on the shapes it was shown and lose on the long ones it skipped."""
    ran = {s.name for s in shapes}
    skipped = [s.name for s in task.shapes_for(on_gpu) if s.name not in ran]
    if not skipped:
        return v
    v["partial"] = skipped
    v["notes"].append(f"partial verdict: shapes not run: {', '.join(skipped)} (--shapes)")
    rec = v.get("recommendation") or {}
    if rec.get("action") == "keep":
        v["recommendation"] = {**rec, "action": "revert", "can_keep": False,
                               "reason": f"not every shape was run (skipped: {', '.join(skipped)}); "
                                         "a keep needs all of them"}
    return v


def _restore(root: Path, saved: dict[str, bytes], after: dict[str, str]) -> None:
    for p, data in saved.items():
        (root / p).write_bytes(data)
    for p in set(after) - set(saved):
        try:
            (root / p).unlink()
        except OSError:
            pass


def timed_verdict(run: _Run, task: Task, shapes: list[Shape]) -> dict:
    """The decision an evaluation would reach on `run`'s timed shapes (timing_stage.time_shape filled
    them, correctness passed): the same summary, recommendation and keep policy, so timing_trust.py's
    A/A counts the keeps and rejections of the rule that decides, not a copy of it."""
    from harness.evaluate import keep_policy, timing_stage  # (start-up: the note above the functions)

    for e in run.shapes:
        e.setdefault("correct", True)
    v: dict[str, Any] = {"task": task.name, "shapes": run.shapes, "reasons": run.reasons, "notes": run.notes,
                         "geomean_speedup": None, "noise_band_pct": None}
    timing_stage._summarise(v, run, shapes)
    return keep_policy.apply(_finish(v, run, time.monotonic(), timing_available=True), task)


def _finish(v: dict, run: _Run, t0: float, timing_available: bool) -> dict:
    if not run.reasons:
        run.stage = "done"
    v["stage"] = run.stage if run.reasons else "done"
    v["accepted"] = not run.reasons
    v["timing_available"] = timing_available
    v["output"] = run.output
    if run.timing_parts_s:
        v["timing_parts_s"] = run.timing_parts_s
    correct = all(s.get("correct") for s in run.shapes) and bool(run.shapes)
    slower = [s["name"] for s in run.shapes if s.get("speedup") and s.get("noise_pct")
              and (s["speedup"] - 1) * 100 < -s["noise_pct"]]
    rec = vd.recommend(correct=correct and v["accepted"], guards_ok=v["accepted"],
                       timing_available=timing_available, geomean_speedup=v["geomean_speedup"],
                       noise_band_pct=v["noise_band_pct"], slower_shapes=slower,
                       note=(f"{run.reasons[0]['rule']}: {run.reasons[0]['message'].splitlines()[0]}"
                             + (f" (+{len(run.reasons) - 1} more)" if len(run.reasons) > 1 else ""))
                       if run.reasons else v.pop("_rec_note", ""))
    v.pop("_rec_note", None)
    v["recommendation"] = rec
    v["wall_s"] = round(time.monotonic() - t0, 3)
    return v


def _evaluate_in_child(run: _Run, v: dict, task: Task, candidate: Path, incumbent: Path, shapes: list[Shape],
                       on_gpu: bool, opts: EvalOptions, secret: int) -> bool:
    from harness.evaluate import correctness  # (start-up: the note above the functions)

    ref_mod = task.load_reference()
    run.stage = "import"
    trace.phase("spawn")
    child = prewarm.take(task, on_gpu, opts)
    # A module beside the candidate never passed the static stage (which refuses importing one): with
    # it on, the candidate comes alone.
    child.stage_siblings = not opts.static
    timing_ok = on_gpu and opts.time
    # Wall seconds per phase in the verdict: where an evaluation's time goes, on any machine.
    phases: dict[str, float] = v.setdefault("phases_s", {})
    # Of each phase, the seconds the child was working (the rest: the parent's reference, the
    # transfer and the comparison of outputs, and waiting for a start).
    busy: dict[str, float] = v.setdefault("child_busy_s", {})
    last = [time.monotonic(), 0.0]

    def mark(name: str, then: str) -> None:
        trace.phase(then)
        now = time.monotonic()
        phases[name] = round(phases.get(name, 0.0) + now - last[0], 3)
        busy[name] = round(busy.get(name, 0.0) + child.busy_s - last[1], 3)
        last[0], last[1] = now, child.busy_s

    try:
        try:
            hello = child.start(opts.import_timeout_s)
        except ChildFailed as e:
            run.output = child.output()
            run.reject("import", e.rule, f"the harness's child failed before any candidate code ran: {e.message}")
            return False
        if not hello.get("ok"):
            run.output = child.output()
            run.reject("import", "setup-failed", f"{hello.get('error')}\n{hello.get('traceback', '')}".strip())
            return False
        mark("spawn", "device")
        v["child_startup_s"] = hello.get("startup_s")
        v["child_start"] = prewarm.describe(child, hello)
        dev, _ = child.request({"op": "device"}, opts.import_timeout_s)
        mark("device", "import")
        v["device"] = dev.get("name", v["device"])
        v["device_info"] = {k: dev[k] for k in dev if k != "ok"}
        # The incumbent is never imported here: the timing stage runs it in a child of its own,
        # which the candidate never shares (parent_clock.py).
        baseline: dict[str, float] = {}
        r, _ = child.request({"op": "import", "role": "candidate", "path": str(child.stage(candidate)),
                              "sha256": v["candidate_sha256"]}, opts.import_timeout_s)
        if not r.get("ok"):
            run.output = child.output()
            detail = f" ({r['detail']})" if r.get("detail") not in (None, "exception") else ""
            if child.unstaged:  # (a ModuleNotFoundError then says why the module was not there)
                detail += (f"; not staged beside the candidate: {', '.join(child.unstaged)} (only regular files "
                           "of the candidate's own folder come with it)")
            run.reject("import", "import-error", f"{r.get('error')}{detail}\n{r.get('traceback', '')}".strip())
            return False
        run.stage = "done"  # (before the import's guard findings, so the verdict's stage says "guard")
        if r.get("patched"):
            run.reject("guard", "harness-patched", "importing the candidate replaced functions the harness relies "
                                                   "on: " + ", ".join(r["patched"][:8]))
        if r.get("watch_settings") != guards.watch_settings().digest():  # (computed here, from the parent's copy)
            run.reject("guard", "harness-patched", "the torch-compute watch in the candidate's process does not permit "
                                                   "what the harness's settings say (its settings were changed)")
        for o in r.get("observed", []):  # guards that watched the import (no-introspection, no-threads)
            run.reject("guard", o["rule"], "[import] " + o["message"])
        mark("import", "correctness")
        ok = correctness.check_all(run, child, task, ref_mod, shapes, on_gpu, opts, secret)
        mark("correctness", "heldout")
        if ok and opts.heldout:
            from harness.evaluate import heldout  # (start-up: the note above the functions)

            ok = heldout.check(run, v, child, task, ref_mod, shapes, on_gpu, opts, secret) and not run.reasons
            mark("heldout", "timing")
        if ok and timing_ok and not run.reasons:
            from harness.evaluate import timing_stage  # (start-up: the note above the functions)

            timed = timing_stage.run_timing(run, v, child, task, ref_mod, shapes, dev, baseline, opts, secret,
                                            candidate, incumbent)
            mark("timing", "end")
            return timed
        return False
    except ChildFailed as e:
        run.output = child.output()
        stage = "import" if run.stage == "import" else ("correctness" if run.stage == "done" else run.stage)
        run.reject(stage, e.rule, e.message)
        return False
    finally:
        # Overlaps the phases: of the round trips' wall time, how much the child was working.
        v["child_s"] = {"busy": round(child.busy_s, 3), "round_trips": round(child.round_trip_s, 3)}
        left = child.leftover_processes()
        if left:
            run.reject(run.stage if run.stage != "done" else "guard", "no-surviving-processes",
                       f"candidate code left {len(left)} process(es) running at the end of the evaluation "
                       f"({', '.join(left[:4])}); they were killed")
        if not run.output and run.reasons:
            run.output = child.output()
        child.close()
        if child.swept:
            run.reject(run.stage if run.stage != "done" else "guard", "no-surviving-processes",
                       f"{len(child.swept)} process(es) started by candidate code outlived the child; killed")

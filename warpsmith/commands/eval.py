"""`warpsmith eval TASK CANDIDATE.py`: one candidate through every stage; exit 0 iff accepted."""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import traceback
from pathlib import Path

from warpsmith.commands.run import TIMEOUT_HELP, check_timeout

# Heavier imports stay inside the functions: cli.build_parser imports every command module on each
# start (`--help` too), so only modules already loaded by then are imported here (commands/__init__.py).
from warpsmith.commands.check import CandidateUnreadable, read_candidate, violation_lines
from harness.evaluate.records import Recommendation, Verdict
from harness.evaluate.sandbox import from_cli
from harness.evaluate.verdict import BEST_US, CAND_US, static_warning_note
from harness.invocation import command
from harness.authoring.tasks import TaskError, load_task


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("eval", help="check, run and time one candidate file against a task",
                              description="Static checks, correctness on every shape, runtime guards and (on a "
                                          "GPU) timing against the incumbent. Exit 0 if accepted, 1 if "
                                          "rejected, 2 for bad usage or input.")
    p.add_argument("task", help="task name (kernels/<name>) or path to a task folder")
    p.add_argument("candidate", type=Path, help="Python file defining the task's entry function")
    p.add_argument("--incumbent", type=Path, default=None, help="file to time against (default: the task's kernel.py)")
    p.add_argument("--json", action="store_true", help="print the verdict as one JSON object")
    p.add_argument("--shapes", default=None, help="comma-separated shape names (default: all for this device)")
    p.add_argument("--seed", type=int, default=None, help="fix the input seed (default: a secret random one)")
    p.add_argument("--no-static", action="store_true", help="skip the static stage")
    p.add_argument("--no-time", action="store_true", help="skip timing even on a GPU")
    p.add_argument("--cpu", action="store_true", help="run in Triton's interpreter even if a GPU is present")
    p.add_argument("--samples", type=int, default=40, help="timed samples per side per shape (default 40)")
    p.add_argument("--no-sandbox", action="store_true", help=__import__("harness.evaluate.sandbox", fromlist=["x"]).NO_SANDBOX_HELP)
    p.add_argument("--timeout", type=float, default=None, metavar="SECONDS", help=TIMEOUT_HELP)
    p.set_defaults(func=run)


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


_SHAPE_TAG = re.compile(r"^\[([^\]]+)\] ")
_LINE_SUFFIX = re.compile(r" \(line (\d+)\)$")


def _where_in_candidate(message: str, candidate: str) -> str:
    """The last traceback frame inside the candidate file, as 'file:line: code', or ''.
    A traceback's first lines are the harness's own frames; the person needs their own line."""
    if not candidate:
        return ""
    lines = message.splitlines()
    found = ""
    for i, line in enumerate(lines):
        m = re.match(r'\s*File "(.+)", line (\d+)', line)
        if m and Path(m.group(1)).name == Path(candidate).name:
            code = lines[i + 1].strip() if i + 1 < len(lines) else ""
            found = f"{_short(m.group(1))}:{m.group(2)}" + (f": {code}" if code else "")
    return found


def _short(path: str) -> str:
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _reason_lines(v: Verdict) -> list[str]:
    """One line per distinct problem: the same failure on several shapes is said once, with the
    shapes listed; a static violation is located as file:line; a crash points at the candidate's line."""
    cand = v.candidate or ""
    merged: dict[tuple[str, str], list[str]] = {}
    extra: dict[tuple[str, str], str] = {}
    out = []
    located = [viol for viol in v.violations or [] if viol.line]
    if located:  # static violations as `warpsmith check` prints them: file:line:col, then the line

        for viol in located:
            mark = "✗" if viol.is_error else "!"
            first, *rest = violation_lines(_short(cand) if cand else "candidate", viol)
            out += [f"  {mark} {first}"] + [f"  {line}" for line in rest]
    shown = {f"static:{viol.rule}" for viol in located}
    for r in v.reasons:
        if r.rule in shown:  # said above, with its place in the file
            continue
        first = (r.message.splitlines() or [""])[0]
        m = _SHAPE_TAG.match(first)
        shape = m.group(1) if m else ""
        text = first[m.end():] if m else first
        if r.rule.startswith("static:"):
            lm = _LINE_SUFFIX.search(text)
            if lm and cand:
                text = f"{_short(cand)}:{lm.group(1)}: {text[:lm.start()]}"
        key = (r.rule, text)
        merged.setdefault(key, [])
        if shape:
            merged[key].append(shape)
        where = _where_in_candidate(r.message, cand)
        if where:
            extra.setdefault(key, where)
        if r.rule == "timeout":
            stuck = [s.name for s in v.shapes if s.error and not str(s.error).startswith("not run")]
            if stuck:
                merged[key].append(stuck[0])
            extra[key] = ("the entry did not return: look for a loop that never ends (in Python or in the "
                          "kernel); if the candidate is only slow, raise the limit with --timeout SECONDS")
    for (rule, text), shapes in merged.items():
        on = f"[{', '.join(dict.fromkeys(shapes))}] " if shapes else ""
        out.append(f"  ✗ {rule}: {on}{text}")
        if (rule, text) in extra:
            out.append(f"      {extra[(rule, text)]}")
    return out


def print_table(v: Verdict, out=None) -> None:
    out = out or sys.stdout  # looked up per call: a default bound at import misses redirections
    status = "ACCEPTED" if v.accepted else f"REJECTED at {v.stage_shown}"
    print(f"{v.task}: {status}  ({v.device}, {v.wall_s:.1f} s)", file=out)
    if v.shapes:  # a candidate stopped before any shape ran has no table to show

        rows = [("shape", "ok", CAND_US, BEST_US, "speedup", "±%", "roofline%", "graph µs")]
        for s in v.shapes:
            rows.append((s.name, s.ok_word, _fmt(s.candidate_us, ".1f"),
                         _fmt(s.incumbent_us, ".1f"), _fmt(s.speedup, ".3f"), _fmt(s.noise_pct, ".1f"),
                         _fmt(s.roofline_pct, ".0f"), _fmt(s.candidate_graph_us, ".1f")))
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        for r in rows:
            print("  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))),
                  file=out)
        if v.geomean_speedup is not None:
            print(f"  geomean speedup {v.geomean_speedup:.3f}x (noise band ±{_fmt(v.noise_band_pct, '.1f')}%)",
                  file=out)
        elif not v.timing_available:
            print("  timing unavailable (no GPU): correctness and guards only", file=out)
    for line in _reason_lines(v):
        print(line, file=out)
    # A located warning's note is listed with the violations above, file:line:col: not said twice.
    said = {static_warning_note(viol) for viol in v.violations or [] if viol.line}
    for n in v.notes:
        if n not in said:
            print(f"  note: {n}", file=out)
    rec = v.recommended or Recommendation()
    if v.reasons:  # the reasons are listed just above; don't print the first one a second time
        print(f"  recommendation: {rec.action}", file=out)
    else:
        print(f"  recommendation: {rec.action} — {rec.reason}", file=out)


def harness_error_verdict(task_name: str, args: argparse.Namespace, trace: str) -> dict:
    """The verdict when the harness itself failed (a bug, or something candidate code did that no
    check turned into a rejection): rejected, never keepable, the traceback's last lines as its output,
    so `eval --json` always prints one JSON object (exit 1)."""
    last = trace.strip().splitlines()[-1] if trace.strip() else "unknown error"
    try:
        sha = hashlib.sha256(Path(args.candidate).read_bytes()).hexdigest()
    except OSError:
        sha = None
    return {"accepted": False, "stage": "import", "task": task_name, "candidate": str(args.candidate),
            "incumbent": str(args.incumbent) if args.incumbent else None, "candidate_sha256": sha,
            "reasons": [{"rule": "harness-error", "message": f"the evaluator failed: {last}"}],
            "device": "", "timing_available": False, "shapes": [], "geomean_speedup": None,
            "noise_band_pct": None, "wall_s": 0.0, "violations": [], "notes": [], "output": trace[-4000:],
            "recommendation": {"action": "revert", "reason": f"rejected: harness-error: {last}", "can_keep": False}}


def run(args: argparse.Namespace) -> int:
    # Cheap checks of the arguments first: importing the evaluator (torch) takes seconds. A path
    # that is no file, or a file that isn't UTF-8 text, is bad input (exit 2), named in one line,
    # with --json too (bad input is never a verdict), as `warpsmith check` does.

    try:
        read_candidate(args.candidate)
        if args.incumbent is not None:
            read_candidate(args.incumbent, what="incumbent")
    except CandidateUnreadable as e:
        print(f"warpsmith eval: {e}", file=sys.stderr)
        return 2
    if args.samples < 1:
        print(f"warpsmith eval: --samples {args.samples}: must be at least 1", file=sys.stderr)
        return 2
    if check_timeout(args.timeout):
        print(f"warpsmith eval: {check_timeout(args.timeout)}", file=sys.stderr)
        return 2

    problem = from_cli(getattr(args, "no_sandbox", False))
    if problem:
        print(f"warpsmith eval: {problem}", file=sys.stderr)
        return 2
    # the evaluator, its stages and the sandbox (~60 ms): not at --help's start (commands/__init__.py)
    from harness.evaluate import EvalOptions, evaluate, prewarm

    # The candidate's (and on a GPU the incumbent's) process starts now, while this one loads the
    # task, torch and the static stage: on the H200 each side's imports take seconds.
    prewarm.for_one_evaluation(False if args.cpu else None, EvalOptions(time=not args.no_time))

    try:
        task = load_task(args.task)
    except TaskError as e:
        print(f"warpsmith eval: {e}", file=sys.stderr)
        return 2
    from harness.authoring.dsl_support import dsl_problem, local_gpu  # (small): not at --help's start (commands/__init__.py)

    problem = dsl_problem(task, on_gpu=not args.cpu and local_gpu())
    if problem:  # (a CuTe DSL task without nvidia-cutlass-dsl or without a GPU)
        print(f"warpsmith eval: {problem}", file=sys.stderr)
        return 2
    if not args.no_static:
        # A broken rules pack is bad input, not a verdict on the candidate: say which pack to fix.
        try:  # tree-sitter and the rules (~40 ms): not at --help's start
            from harness.guard import RuleError, rules_for_task
        except ImportError:
            RuleError = None  # the evaluator itself reports a missing tree-sitter (fails closed)
        if RuleError is not None:
            try:
                rules_for_task(task)
            except RuleError as e:
                print(f"warpsmith eval: {e}\n  fix that rules pack (`{command('packs validate PATH')}` checks it), "
                      "or pass --no-static to evaluate without static checks, knowingly", file=sys.stderr)
                return 2
    try:
        opts = EvalOptions(static=not args.no_static, time=not args.no_time, seed=args.seed, samples=args.samples,
                           shapes=task.shape_names(args.shapes) if args.shapes else None,
                           on_gpu=False if args.cpu else None)
        if args.timeout is not None:
            opts.run_timeout_s = args.timeout
        v = evaluate(task, args.candidate, args.incumbent, opts)
    except TaskError as e:
        print(f"warpsmith eval: {e}", file=sys.stderr)
        return 2
    except Exception:  # noqa: BLE001 - a fault of the harness's own: still a verdict (rejected), saying where
        v = harness_error_verdict(task.name, args, traceback.format_exc())
    try:  # the evaluator's JSON object (the wire), read once
        typed = Verdict.from_json(v)
    except Exception:  # noqa: BLE001 - a verdict the record can't read is the harness's fault too
        v = harness_error_verdict(task.name, args, traceback.format_exc())
        typed = Verdict.from_json(v)
    if args.json:
        # Through the typed record, which writes the object back key for key: the JSON is unchanged.
        print(json.dumps(typed.to_json(), indent=1))
    else:
        print_table(typed)
    return 0 if typed.accepted else 1

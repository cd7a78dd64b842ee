"""Headless mode: print the loop's events as lines, decide by policy or by a y/n prompt on stdin."""
from __future__ import annotations

import sys
from typing import TextIO

from harness import events as ev
from harness.loop import DecisionReply, DecisionRequest


def shape_table(verdict: dict) -> list[str]:
    rows = [f"    {'shape':<22} {'ok':<3} {'cand us':>10} {'best us':>10} {'speedup':>8} {'roofline':>8}"]
    for s in verdict.get("shapes", []):
        def num(k, fmt):
            v = s.get(k)
            return format(v, fmt) if isinstance(v, (int, float)) else "-"
        rows.append(f"    {s['name'][:22]:<22} {'yes' if s.get('correct') else 'NO':<3} "
                    f"{num('candidate_us', '.1f'):>10} {num('incumbent_us', '.1f'):>10} "
                    f"{num('speedup', '.3f'):>8} {num('roofline_pct', '.0f') + '%' if s.get('roofline_pct') else '-':>8}")
    return rows


def _untimed_note(v: dict) -> str:
    """Why a verdict has no timing: no GPU, or rejected before the timing stage."""
    if v.get("timing_available"):
        return ""
    if "interpreter" in str(v.get("device")):
        return ", timing unavailable (interpreter)"
    return ", not timed" if v.get("stage") != "done" else ", timing unavailable"


class Printer:
    """Renders events as plain lines. Reasoning streams inline, prefixed once per iteration."""

    def __init__(self, out: TextIO = sys.stdout, show_reasoning: bool = True):
        self.out, self.show_reasoning = out, show_reasoning
        self._in_reasoning = False

    def _line(self, text: str) -> None:
        if self._in_reasoning:
            self.out.write("\n")
            self._in_reasoning = False
        self.out.write(text + "\n")
        self.out.flush()

    def __call__(self, e: ev.Event) -> None:
        if isinstance(e, ev.SessionStarted):
            verb = "resumed" if e.resumed else "started"
            self._line(f"session {e.session_id} {verb}: task {e.task}, agent {e.agent}, device {e.device}, "
                       f"decisions {e.decision_mode}")
            if e.packs:
                self._line("  packs: " + ", ".join(f"{p['id']}@{p['version']}" for p in e.packs))
        elif isinstance(e, ev.IterationStarted):
            self._line(f"\n[{e.iteration}] proposing")
        elif isinstance(e, ev.Reasoning) and self.show_reasoning:
            if not self._in_reasoning:
                self.out.write("  > ")
                self._in_reasoning = True
            self.out.write(e.text.replace("\n", "\n  > "))
            self.out.flush()
        elif isinstance(e, ev.AgentNotice):
            self._line(f"  agent {e.level}: {e.message}")
        elif isinstance(e, ev.Usage):
            self._line(f"  tokens in {e.input_tokens} out {e.output_tokens} cached {e.cached_tokens} "
                       f"reasoning {e.reasoning_tokens}; ${e.cost_usd:.4f} (session ${e.session_cost_usd:.4f})")
        elif isinstance(e, ev.CandidateProposed):
            self._line(f"  [{e.iteration}] candidate {e.commit[:10]}: {e.description}")
        elif isinstance(e, ev.StaticResult) and not e.ok:
            for v in e.violations:
                self._line(f"  static: line {v.get('line')}: {v.get('rule')}: {v.get('message')}")
        elif isinstance(e, ev.EvalStarted):
            self._line(f"  [{e.iteration}] evaluating ({e.backend}{' on ' + e.worker if e.worker else ''})")
        elif isinstance(e, ev.ProfileReady):
            self._line(f"  [{e.iteration}] incumbent profile:")
            for s in e.profile.get("shapes", []):
                self._line(f"    {s.get('name')}: {s.get('hint')}")
        elif isinstance(e, ev.EvalResult):
            v = e.verdict
            status = "accepted" if v.get("accepted") else f"rejected at {v.get('stage')}"
            g = v.get("geomean_speedup")
            self._line(f"  [{e.iteration}] verdict: {status}" + (f", geomean speedup {g:.3f}x" if g else "")
                       + _untimed_note(v))
            for r in v.get("reasons", [])[:8]:
                self._line(f"    {r.get('rule')}: {r.get('message')}")
            for row in shape_table(v):
                self._line(row)
        elif isinstance(e, ev.Recommendation):
            self._line(f"  [{e.iteration}] recommend {e.action}: {e.reason}")
        elif isinstance(e, ev.Decision):
            extra = " (override)" if e.override else ""
            self._line(f"  [{e.iteration}] decision: {e.action} by {e.by}{extra}" + (f": {e.reason}" if e.reason else ""))
        elif isinstance(e, ev.PackReloaded):
            self._line(f"  pack {e.pack_id} reloaded" + ("" if e.ok else f" FAILED, last good kept: {e.message}"))
        elif isinstance(e, ev.WorkerStatus):
            self._line("  workers: " + "; ".join(f"{w['name']}({w.get('gpu', '-')}): {w['state']}" for w in e.workers))
        elif isinstance(e, ev.SessionEnded):
            self._line(f"\nsession ended: {e.reason}; best {e.best[:10]} after {e.iterations} "
                       f"iteration{'' if e.iterations == 1 else 's'}")


class StdinDecider:
    """Asks y/n on the terminal. Keeping against the recommendation needs a second 'yes'."""

    def __init__(self, inp: TextIO = sys.stdin, out: TextIO = sys.stdout, task=None):
        self.inp, self.out, self.task = inp, out, task  # task: for 'b' (keep for winning buckets)
        self.eof = False

    def _ask(self, question: str) -> str:
        self.out.write(question)
        self.out.flush()
        line = self.inp.readline()
        if not line:  # stdin closed: the recommendation is taken, and journalled as nobody's choice
            self.eof = True
            return ""
        return line.strip().lower()

    def decide(self, request: DecisionRequest) -> DecisionReply:
        default = "y" if request.action == "keep" else "n"
        buckets = bool(self.task is not None and self.task.buckets and request.can_keep)
        while True:
            ans = self._ask(f"  keep candidate {request.iteration}? [y/n{'/b' if buckets else ''}, default "
                            f"{default}, or 'n: reason'{'; b: keep for the buckets it wins' if buckets else ''}] ")
            if self.eof:
                return DecisionReply(request.action, "auto", "stdin closed: the recommendation was followed")
            ans = ans or default
            if ans.startswith("b") and buckets:
                from harness.dispatch import bucket_results

                results = bucket_results(self.task, request.verdict)
                wins = [r.bucket for r in results if r.wins]
                if not wins:
                    self.out.write("  it wins no bucket: " + "; ".join(f"{r.bucket}: {r.reason}" for r in results) + "\n")
                    continue
                return DecisionReply("revert", "human", f"kept for the {', '.join(wins)} bucket(s) only",
                                     buckets=wins)
            if ans.startswith("n"):
                return DecisionReply("revert", "human", ans.partition(":")[2].strip())
            if ans.startswith("y"):
                if request.action != "keep" and request.can_keep:
                    confirm = self._ask(f"  the harness recommends revert ({request.reason}). Keep anyway? [yes/no] ")
                    if confirm != "yes":
                        continue
                    return DecisionReply("keep", "human", confirmed_override=True)
                return DecisionReply("keep", "human")

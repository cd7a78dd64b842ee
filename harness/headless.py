"""Headless mode: print the loop's events as lines, decide by policy or by a y/n prompt on stdin."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Mapping, TextIO

from harness import events as ev
from harness.model.dispatch import bucket_results
from harness.evaluate.records import Verdict
from harness.evaluate.sandbox import OFF_BANNER, disabled_by_user
from harness.evaluate.verdict import BEST_US, CAND_US, cannot_keep_reason  # noqa: F401 (callers import it from here)
from harness.loop import DecisionReply, DecisionRequest

DIFF_LIMIT = 80  # diff lines shown before a decision; the rest is one git command away


def diff_excerpt(diff: str, limit: int = DIFF_LIMIT) -> tuple[list[str], int]:
    """The first `limit` lines of a unified diff, and how many were left off."""
    lines = diff.splitlines()
    return lines[:limit], max(0, len(lines) - limit)


def _diff_style(line: str) -> str:
    # By hand, line by line: Rich's Syntax(..., "diff") pads every line to the terminal's width,
    # and a diff copied from the terminal would carry those trailing spaces.
    if line.startswith(("+++", "---")):
        return "bold"
    if line.startswith("@@"):
        return "cyan"
    if line.startswith("+"):
        return "green"
    if line.startswith("-"):
        return "red"
    return ""


def _num(v, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) else "-"


def shape_table(verdict: Verdict) -> list[str]:
    shapes = verdict.shapes
    if not shapes:  # stopped before any shape ran: no header without rows
        return []
    ok = max(3, *(len(s.ok_word) for s in shapes))  # "not run" where a shape never ran
    rows = [f"    {'shape':<22} {'ok':<{ok}} {CAND_US:>10} {BEST_US:>10} {'speedup':>8} {'roofline':>8}"]
    for s in shapes:
        rows.append(f"    {s.name[:22]:<22} {s.ok_word:<{ok}} "
                    f"{_num(s.candidate_us, '.1f'):>10} {_num(s.incumbent_us, '.1f'):>10} "
                    f"{_num(s.speedup, '.3f'):>8} {_num(s.roofline_pct, '.0f') + '%' if s.roofline_pct else '-':>8}")
    return rows


def _untimed_note(v: Verdict) -> str:
    """Why a verdict has no timing: no GPU, or rejected before the timing stage."""
    if v.timing_available:
        return ""
    if "interpreter" in str(v.device):
        return ", timing unavailable (interpreter)"
    return ", not timed" if v.stage != "done" else ", timing unavailable"


class Printer:
    """Renders events as plain lines. Reasoning streams inline, prefixed once per iteration."""

    def __init__(self, out: TextIO | None = None, show_reasoning: bool = True):
        # sys.stdout looked up now, not at import: a redirected stdout (tests, callers) is honoured
        self.out, self.show_reasoning = out or sys.stdout, show_reasoning
        self._in_reasoning = False
        # What a decision shows besides the events' lines: each candidate's diff against its
        # incumbent (by commit), each iteration's verdict (why it can't be kept).
        self.proposals: dict[str, ev.CandidateProposed] = {}
        self.verdicts: dict[int, Verdict] = {}
        self.ended: ev.SessionEnded | None = None  # said in the run's summary block (harness.sessions.summary)

    def remember(self, e: ev.Event) -> None:
        """Keep what a later decision needs (also fed from the journal on a resume)."""
        if isinstance(e, ev.CandidateProposed):
            self.proposals[e.commit] = e
        elif isinstance(e, ev.EvalResult):
            self.verdicts[e.iteration] = e.verdict

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
            if disabled_by_user():
                self._line("  " + OFF_BANNER)
        elif isinstance(e, ev.IterationStarted):
            self._line(f"\n[{e.iteration}] proposing")
        elif isinstance(e, ev.Reasoning) and self.show_reasoning:
            if not self._in_reasoning:
                self.out.write("  > ")
                self._in_reasoning = True
            self.out.write(e.text.replace("\n", "\n  > "))
            self.out.flush()
        elif isinstance(e, ev.AgentNotice):
            # Why each pack was selected (before the first iteration) is chatter here: the packs
            # line above says what was selected. Warnings and errors are always said.
            # (HardwarePackChosen is such a line too: the packs line names the hardware pack.)
            if e.level != "info" or e.iteration > 0:
                self._line(f"  agent {e.level}: {e.message}")
        elif isinstance(e, ev.AgentSwitched):
            self._line(f"  agent switched to {e.label}")
        elif isinstance(e, ev.Usage):
            self._line(f"  tokens in {e.input_tokens} out {e.output_tokens} cached {e.cached_tokens} "
                       f"reasoning {e.reasoning_tokens}; ${e.cost_usd:.4f} (session ${e.session_cost_usd:.4f})")
        elif isinstance(e, ev.CandidateProposed):
            self.remember(e)
            self._line(f"  [{e.iteration}] candidate {e.commit[:10]}: {e.description}")
        elif isinstance(e, ev.EvalStarted):
            limit = f"; a call may take up to {e.call_timeout_s:g} s" if e.call_timeout_s else ""
            self._line(f"  [{e.iteration}] evaluating ({e.backend}{' on ' + e.worker if e.worker else ''}{limit})")
        elif isinstance(e, ev.ProfileReady):
            self._line(f"  [{e.iteration}] incumbent profile:")
            for s in e.profile.get("shapes", []):
                self._line(f"    {s.get('name')}: {s.get('hint')}")
        elif isinstance(e, ev.EvalResult):
            self.remember(e)
            v = e.verdict
            status = "accepted" if v.accepted else f"rejected at {v.stage_shown}"
            g = v.geomean_speedup
            self._line(f"  [{e.iteration}] verdict: {status}" + (f", geomean speedup {g:.3f}x" if g else "")
                       + _untimed_note(v) + (", not sandboxed" if v.sandbox is False else ""))
            for r in v.reasons[:8]:
                self._line(f"    {r.rule}: {r.message}")
            for row in shape_table(v):
                self._line(row)
        elif isinstance(e, ev.Recommendation):
            v = self.verdicts.get(e.iteration) or Verdict.empty()
            if e.can_keep:  # (a rejection's reasons are the verdict's lines above: said once)
                b = v.keep_buckets
                what = f"keep for buckets {', '.join(b)}" if b else e.action
                self._line(f"  [{e.iteration}] recommend {what}: {e.reason}")
            else:
                self._line(f"  [{e.iteration}] cannot be kept: {v.cannot_keep_reason}")
        elif isinstance(e, ev.Decision):
            extra = " (override)" if e.override else ""
            self._line(f"  [{e.iteration}] decision: {e.action} by {e.by}{extra}" + (f": {e.reason}" if e.reason else ""))
        elif isinstance(e, ev.PackReloaded):
            self._line(f"  pack {e.pack_id} reloaded" + ("" if e.ok else f" FAILED, last good kept: {e.message}"))
        elif isinstance(e, ev.WorkerStatus):
            self._line("  workers: " + "; ".join(f"{w['name']}({w.get('gpu', '-')}): {w['state']}" for w in e.workers))
        elif isinstance(e, ev.SessionEnded):
            self.ended = e


class StdinDecider:
    """Asks y/n on the terminal, after showing the candidate's diff against the incumbent.

    Answers: y | yes (keep), n | no (revert), `n: reason` (revert; the reason goes to the agent
    verbatim), b (keep for the buckets it wins, where the task has buckets), Enter (the
    recommendation). Keeping against the recommendation asks for a confirmation (y | yes | n | no).
    Anything else is answered with the list of what is accepted, and asked again."""

    def __init__(self, inp: TextIO | None = None, out: TextIO | None = None, task=None,
                 proposals: Mapping[str, ev.CandidateProposed] | None = None, repo: Path | None = None,
                 color: bool | None = None):
        self.inp, self.out, self.task = inp or sys.stdin, out or sys.stdout, task  # task: for 'b' (bucket keeps)
        self.proposals = proposals if proposals is not None else {}  # commit -> CandidateProposed
        self.repo = repo  # the session's git repository, for the full-diff command
        self.color = color  # None: colour when `out` is a terminal
        self.eof = False

    def _ask(self, question: str) -> tuple[str, str]:
        """(the keyword, lower-cased; the reason after a ':', verbatim)."""
        self._drop_typeahead()
        self.out.write(question)
        self.out.flush()
        line = self.inp.readline()
        if not line:  # stdin closed: the recommendation is taken, and journalled as nobody's choice
            self.eof = True
            return "", ""
        word, _, reason = line.strip().partition(":")
        return word.strip().lower(), reason.strip()

    def _drop_typeahead(self) -> None:
        """Discard what was typed at a terminal before this question was on screen: a 'y' meant
        for an earlier prompt (or typed during an evaluation) must not answer this one. (The TUI
        ignores keys for ~300 ms after a prompt appears for the same reason.) Piped answers are
        scripted, and kept."""
        try:
            if not self.inp.isatty():
                return
            import termios  # (POSIX only)

            termios.tcflush(self.inp.fileno(), termios.TCIFLUSH)
        except (AttributeError, ValueError, OSError, ImportError):  # not a real terminal (or Windows)
            pass

    def _say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def show_diff(self, request: DecisionRequest) -> None:
        """The candidate's unified diff against the incumbent it was measured against, capped."""
        p = self.proposals.get(request.commit)
        if p is None:
            return
        if not p.diff.strip():
            self._say(f"  [{request.iteration}] no change to the code")
            return
        lines, more = diff_excerpt(p.diff)
        self._say(f"  [{request.iteration}] diff against the incumbent {p.incumbent[:10] or '(best)'}:")
        color = self.color if self.color is not None else bool(getattr(self.out, "isatty", lambda: False)())
        if color:
            from rich.console import Console  # (only for a colour terminal)
            from rich.text import Text

            console = Console(file=self.out, force_terminal=True, highlight=False, soft_wrap=True)
            for line in lines:
                console.print(Text("    " + line, style=_diff_style(line)))
        else:
            for line in lines:
                self._say("    " + line)
        if more:
            where = f"git -C {self.repo} diff {p.incumbent[:10] or 'best'} {request.commit[:10]}" if self.repo \
                else f"the CandidateProposed record of iteration {request.iteration} in the session's journal.jsonl"
            self._say(f"    … {more} more line{'' if more == 1 else 's'}; full diff: {where}")

    def decide(self, request: DecisionRequest) -> DecisionReply:
        buckets = bool(self.task is not None and self.task.buckets and request.can_keep)
        recommended_b = buckets and bool(request.verdict.keep_buckets)
        default = "y" if request.action == "keep" else ("b" if recommended_b else "n")
        self.show_diff(request)
        if request.can_keep:
            question = (f"  keep candidate {request.iteration}? [y/n{'/b' if buckets else ''}, default {default}, "
                        f"or 'n: reason'{'; b: keep for the buckets it wins' if buckets else ''}] ")
            accepted = (f"  answer y (keep), n (revert), n: reason (revert, and tell the agent why)"
                        f"{', b (keep for the buckets it wins)' if buckets else ''}, or Enter for {default}")
        else:
            question = f"  candidate {request.iteration} cannot be kept: revert it? [n (default), or 'n: reason'] "
            why = request.verdict.cannot_keep_reason
            accepted = "  answer n (revert), n: reason (revert, and tell the agent why), or Enter for n"
        while True:
            word, reason = self._ask(question)
            if self.eof:
                return DecisionReply(request.action, "auto", "stdin closed: the recommendation was followed")
            if not word and not reason:
                word = default
            if word in ("n", "no"):
                return DecisionReply("revert", "human", reason)
            if not request.can_keep and word in ("y", "yes", "b") and not reason:
                self._say(f"  candidate {request.iteration} cannot be kept: {why}")
                self._say(accepted)
                continue
            if word == "b" and buckets and not reason:
                results = bucket_results(self.task, request.verdict)
                wins = [r.bucket for r in results if r.wins]
                if not wins:
                    self._say("  it wins no bucket: " + "; ".join(f"{r.bucket}: {r.reason}" for r in results))
                    continue
                return DecisionReply("revert", "human", f"kept for the {', '.join(wins)} bucket(s) only",
                                     buckets=wins)
            if word in ("y", "yes") and not reason:
                if request.action == "keep":
                    return DecisionReply("keep", "human")
                return self._confirm(request)
            self._say(accepted)

    def _confirm(self, request: DecisionRequest) -> DecisionReply:
        """Keeping against a revert recommendation: y | yes keeps (an override), n | no | Enter
        reverts, `n: reason` reverts with a reason for the agent."""
        while True:
            word, reason = self._ask(f"  the harness recommends revert ({request.reason}). Keep anyway? "
                                     f"[y/n, default n, or 'n: reason'] ")
            if self.eof:
                return DecisionReply(request.action, "auto", "stdin closed: the recommendation was followed")
            if word in ("y", "yes") and not reason:
                return DecisionReply("keep", "human", confirmed_override=True)
            if word in ("n", "no") or (not word and not reason):
                return DecisionReply("revert", "human", reason)
            self._say("  answer y (keep it anyway), n (revert), n: reason (revert, and tell the agent why), "
                      "or Enter for n")

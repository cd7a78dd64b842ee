"""The LLM agent: the propose() state machine that the provider modules (anthropic.py, openai.py) plug
their streams into, and what a provider needs to write one (Answer, Conversation, cancel_watch,
http_timeout, tool_chunk).

A provider module only knows how to send one request and turn its stream into ReasoningChunks plus an
`Answer`. Everything a person relies on (a retry is announced, a bad key stops with one sentence, the
money is counted, the transcript is written even when cancelled) lives here once, so the three
providers behave the same; the parts it draws on live beside it: config.py (config file and keys),
budget.py (prices and the session's budget), retry.py (sorting failures, waiting), extract.py (the
candidate out of an answer), transcript.py (the Markdown record).
"""
from __future__ import annotations

import json
import random
import socket
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generator, Iterator

import httpx2

from harness.agents.base import (AgentEvent, Exhausted, Notice, Proposal, ProposalContext, ReasoningChunk,
                                 UsageReport)
from harness.agents.budget import Budget, PriceTable
from harness.agents.config import config_path, redact
from harness.agents.extract import SUBMIT_TOOL_NAME, ExtractionError, ToolCall, extract_candidate, feedback_for
from harness.agents.retry import Failure, RetryPolicy, StreamDropped, classify
from harness.agents.transcript import Transcript
from harness.authoring.paths import config_dir


@dataclass
class Answer:
    """What one request streamed back. Providers fill it; the base class reads it."""

    reasoning: str = ""
    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    complete: bool = False
    stop_reason: str = ""
    input_tokens: int = 0  # every prompt token, cached ones included
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 0  # reasoning tokens included (they are billed as output)
    reasoning_tokens: int = 0

    @property
    def has_usage(self) -> bool:
        return bool(self.input_tokens or self.output_tokens)


@dataclass
class Turn:
    """A feedback round: what the model said, and what we told it."""

    assistant: str
    feedback: str


@dataclass
class Conversation:
    system: str
    prompt: str
    cut: int = 0  # chars of `prompt` that are stable across iterations (cache breakpoint)
    turns: list[Turn] = field(default_factory=list)


def _abort(stream: Any) -> None:
    """Unblock a reader thread stuck in recv(): shut the socket down (closing it from another thread
    does not wake the reader on Linux). Without a socket (mock transports) close the stream."""
    response = getattr(stream, "response", None)
    ns = getattr(response, "extensions", {}).get("network_stream") if response is not None else None
    sock = ns.get_extra_info("socket") if ns is not None else None
    if sock is not None:
        # socket.socket.shutdown, not SSLSocket.shutdown: the latter drops the TLS object under the reader.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)
    else:
        stream.close()


@contextmanager
def cancel_watch(cancel: threading.Event, stream: Any) -> Iterator[None]:
    """Abort the stream from a watcher thread when `cancel` is set, so a request blocked waiting for
    the next chunk ends at once rather than at the next chunk."""
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if cancel.wait(0.1):
                if not done.is_set():
                    try:
                        _abort(stream)
                    except Exception:  # aborting a half-read response may raise; cancel wins anyway
                        pass
                return

    t = threading.Thread(target=watch, name="warpsmith-cancel-watch", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()


def http_timeout(read_s: float) -> httpx2.Timeout:
    """The SDK clients' timeouts: `read_s` is the longest wait for the next chunk of a stream."""
    return httpx2.Timeout(connect=15.0, read=read_s, write=60.0, pool=60.0)


def tool_chunk(name: str, arguments: str) -> ReasoningChunk:
    """What the reasoning pane shows for a tool call: its name and size, not the source it carries."""
    return ReasoningChunk(f"\n[{name}: {len(arguments):,} chars]\n", "tool")


# Where harness.prompt's user part stops being the same from one iteration to the next: the packs and
# the task come first, then the person's ideas and the incumbent. Used when the loop passes no offset.
STABLE_END_MARKERS = ("\n# Standing directions from the person", "\n# Incumbent (")


def stable_prefix_end(prompt: str, explicit: int | None = 0) -> int:
    """Chars of `prompt` that stay the same across iterations (0: unknown). A provider cache
    breakpoint goes there, so packs and task are read from cache after the first request."""
    if explicit and 0 < explicit < len(prompt):
        return explicit
    hits = [i for i in (prompt.find(m) for m in STABLE_END_MARKERS) if i > 0]
    return min(hits) + 1 if hits else 0


def default_prompt(ctx: ProposalContext) -> tuple[str, str]:
    """A plain prompt for when the loop gave none (no prompt builder): role, task, incumbent, history."""
    t = ctx.task
    system = (f"You are a GPU kernel engineer. You write {t.dsl} kernels that are correct on every shape "
              f"and faster than the incumbent. Answer with one complete Python module defining "
              f"`{t.entry}`; use the {SUBMIT_TOOL_NAME} tool when it is available, else one ```python block.")
    shapes = "\n".join(f"- {s.name}: {s.dims}{' (long)' if s.long else ''}" for s in t.shapes)
    hist = "\n".join(f"- #{a.iteration} {a.outcome}: {a.description} {a.summary} {a.veto_reason}".rstrip()
                     for a in ctx.history[-10:])
    ideas = "\n".join(f"- {i}" for i in ctx.ideas)
    user = (f"Task {t.name}: {t.summary}\nEntry: `{t.entry}`\nShapes:\n{shapes}\n\n"
            + (f"Standing ideas from the person:\n{ideas}\n\n" if ideas else "")
            + (f"Recent attempts:\n{hist}\n\n" if hist else "")
            + f"Incumbent (commit {ctx.incumbent_commit[:10]}):\n```python\n{ctx.incumbent_source}\n```\n"
            + "Propose one faster candidate.")
    return system, user


class LLMAgent:
    """The propose() state machine. Subclasses implement `_stream(ctx, conv, answer)`: send one request,
    yield ReasoningChunks as they arrive, fill `answer`, raise on failure."""

    name = "llm"
    provider = "llm"  # key into prices.toml
    uses_tools = True

    def __init__(self, model: str, *, budget: Budget | None = None, transcript_dir: str | Path | None = None,
                 prices: PriceTable | None = None, retry: RetryPolicy | None = None,
                 feedback_rounds: int = 1, seed: int | None = None, secrets: tuple[str, ...] = ()):
        self.model = model
        self.budget = budget if budget is not None else Budget()
        self.transcript_dir = Path(transcript_dir) if transcript_dir else None
        self.prices = prices if prices is not None else PriceTable.load()
        self.retry = retry or RetryPolicy()
        self.feedback_rounds = feedback_rounds
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._secrets = tuple(s for s in secrets if s)
        self._warned_price = False

    # subclasses -------------------------------------------------------------------------------
    def _stream(self, ctx: ProposalContext, conv: Conversation, answer: Answer) -> Iterator[AgentEvent]:
        raise NotImplementedError

    def _on_bad_request(self, failure: Failure, exc: BaseException) -> str | None:
        """A 400 the agent can work around (drop tools, ...): return a notice and retry at once."""
        return None

    key_env = ""  # hosted providers: the variable that holds the key, named in a 401's message

    def _fatal_message(self, failure: Failure) -> str:
        if self.key_env:
            if failure.status == 401:
                return (f"{self.name}: the API key was refused (401 {failure.message}). Set {self.key_env} or "
                        f"api_key in [{self.name}] of {config_path()}, then resume the session.")
            if failure.status == 403:
                return f"{self.name}: this key may not use {self.model} (403: {failure.message})."
            if failure.status == 404:
                return (f"{self.name}: model {self.model!r} not found (404: {failure.message}). "
                        f"Check the id in --agent {self.name}:MODEL.")
        return f"{self.label}: {failure.message}"

    @property
    def label(self) -> str:
        return f"{self.name}:{self.model}" if self.model else self.name

    # accounting -------------------------------------------------------------------------------
    def _usage(self, a: Answer) -> tuple[UsageReport, str | None]:
        price = self.prices.lookup(self.provider, self.model)
        note = None
        if price is None:
            cost = 0.0
            if self.provider != "openai-compat" and not self._warned_price:
                self._warned_price = True
                note = (f"{self.label}: no price for {self.model!r} in prices.toml; its cost counts as $0 "
                        f"and --budget-usd cannot stop it. Add [{self.provider}.\"{self.model}\"] to "
                        f"{config_dir() / 'prices.toml'}")
        else:
            cost = price.cost(a.input_tokens, a.cached_tokens, a.cache_write_tokens, a.output_tokens)
        return UsageReport(a.input_tokens, a.output_tokens, a.cached_tokens, a.reasoning_tokens, cost), note

    # the state machine ------------------------------------------------------------------------
    def propose(self, ctx: ProposalContext) -> Iterator[AgentEvent]:
        system, prompt = ctx.system, ctx.prompt
        if not prompt:
            system, prompt = default_prompt(ctx)
        conv = Conversation(system, prompt, stable_prefix_end(prompt, getattr(ctx, "prompt_cut", 0)))
        transcript = Transcript(self.transcript_dir, self.name, self.model, ctx.iteration, self._secrets)
        transcript.add("System", system)
        transcript.add("Prompt", prompt)
        totals = UsageReport()
        try:
            for round_ in range(self.feedback_rounds + 1):
                answer = yield from self._request(ctx, conv, transcript, totals)
                if answer is None:
                    return
                try:
                    cand = extract_candidate(answer.text, answer.tool_calls, ctx.task.entry)
                except ExtractionError as e:
                    problem = str(e)
                    if answer.stop_reason in ("max_tokens", "length", "max_output_tokens"):
                        problem += " (the answer hit the output token limit)"
                    if round_ < self.feedback_rounds:
                        yield Notice("warning", f"{self.label}: no usable candidate: {problem}; asking again")
                        fb = feedback_for(problem, ctx.task.entry, self.uses_tools)
                        conv.turns.append(Turn(_assistant_echo(answer), fb))
                        transcript.add("Feedback", fb)
                        continue
                    yield Notice("warning", f"{self.label}: no usable candidate after feedback: {problem}; "
                                            "giving up this proposal")
                    return
                path = transcript.path
                yield Proposal(cand.source, cand.description,
                               {"agent": self.name, "model": self.model, "via": cand.via,
                                "rationale": cand.rationale[:2000],
                                "transcript": str(path) if path else "",
                                "usage": {**totals.__dict__, "cost_usd": round(totals.cost_usd, 6)}})
                return
        finally:
            transcript.model = self.model  # openai-compat learns its model on the first request
            try:
                transcript.write()
            except OSError:
                pass  # a transcript is a record, never a reason to lose the proposal

    def _request(self, ctx: ProposalContext, conv: Conversation, transcript: Transcript,
                 totals: UsageReport) -> Generator[AgentEvent, None, Answer | None]:
        """One request with retries. Returns the Answer, or None after yielding why there is none."""
        retries = 0
        while True:
            if ctx.cancel.is_set():
                return None
            if self.budget.exhausted:
                yield Exhausted(f"budget reached: {self.budget.summary()}", fatal=False)
                return None
            answer = Answer()
            failure: Failure | None = None
            exc: BaseException | None = None
            try:
                yield from self._stream(ctx, conv, answer)
                if not answer.complete and not ctx.cancel.is_set():
                    raise StreamDropped("no end-of-message event")
            except Exception as e:  # every SDK/transport failure is sorted below, never raised to the loop
                exc = e
                if not ctx.cancel.is_set():
                    failure = classify(e)
                    # A server may echo the key in an error; notices end up in the journal.
                    failure.message = redact(failure.message, self._secrets)
            finally:
                # Count what was spent even when the stream failed or was cancelled half-way.
                if answer.has_usage:
                    report, note = self._usage(answer)
                    self.budget.add(report)
                    if note:
                        transcript.add("Price", note)
                    transcript.add("Usage", json.dumps(report.__dict__))
                else:
                    report, note = None, None
                if answer.reasoning:
                    transcript.add("Reasoning", answer.reasoning)
                if answer.text or answer.tool_calls:
                    transcript.add("Answer", answer.text + "".join(
                        f"\n[tool call {c.name}]\n{c.arguments}" for c in answer.tool_calls))
            if note:
                yield Notice("warning", note)
            if report is not None:
                for k in ("input_tokens", "output_tokens", "cached_tokens", "reasoning_tokens", "cost_usd"):
                    setattr(totals, k, getattr(totals, k) + getattr(report, k))
                yield report
                if self.budget.crossed_warning():
                    yield Notice("warning", f"80% of the budget spent: {self.budget.summary()}")
            if ctx.cancel.is_set():
                transcript.add("Cancelled", "the request was cancelled")
                yield Notice("info", f"{self.label}: request cancelled")
                return None
            if failure is None:
                return answer
            transcript.add("Error", failure.message)
            if failure.kind == "bad-request" and exc is not None:
                fix = self._on_bad_request(failure, exc)
                if fix:
                    yield Notice("warning", f"{self.label}: {fix}")
                    continue
            if failure.kind != "retry":
                yield Exhausted(self._fatal_message(failure), fatal=True)
                return None
            if retries >= self.retry.max_retries:
                yield Notice("error", f"{self.label}: {failure.message}; gave up after {retries} retries")
                return None
            with self._rng_lock:
                delay = self.retry.delay(retries, failure.retry_after, self._rng)
            retries += 1
            why = " (server's retry-after)" if failure.retry_after is not None else ""
            yield Notice("warning", f"{self.label}: {failure.message}; retry {retries}/{self.retry.max_retries} "
                                    f"in {delay:.1f}s{why}")
            if ctx.cancel.wait(delay):
                yield Notice("info", f"{self.label}: request cancelled")
                return None


def _assistant_echo(answer: Answer) -> str:
    """What to put back as the assistant's turn of a feedback round (text only: thinking blocks and
    unanswered tool calls can't be replayed portably)."""
    parts = [answer.text.strip()]
    for c in answer.tool_calls:
        parts.append(f"[I called {c.name} with arguments: {c.arguments[:4000]}]")
    return "\n\n".join(p for p in parts if p) or "(no text)"

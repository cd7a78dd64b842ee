"""What every LLM agent shares: config and keys, prices and budget, retries, candidate extraction,
transcripts, and the propose() state machine the provider modules plug their streams into.

A provider module (anthropic.py, openai.py) only knows how to send one request and turn its stream
into ReasoningChunks plus an `Answer`. Everything a person relies on (a retry is announced, a bad key
stops with one sentence, the money is counted, the transcript is written even when cancelled) lives
here once, so the three providers behave the same.
"""
from __future__ import annotations

import ast
import email.utils
import json
import os
import random
import re
import socket
import sys
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generator, Iterator, Mapping

from harness.agents.base import (AgentEvent, Exhausted, Notice, Proposal, ProposalContext,
                                 UsageReport)
from harness.authoring.paths import config_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

BUILTIN_PRICES = Path(__file__).with_name("prices.toml")


class AgentConfigError(ValueError):
    """A spec, key or config file the user must fix before an agent can start. str() is one line."""


# -- config file and keys ----------------------------------------------------------------------

def config_path() -> Path:
    return config_dir() / "config.toml"


def _read_toml(path: Path) -> dict:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as e:
        raise AgentConfigError(f"{path}: bad TOML: {e}; fix or delete the file") from None


def load_config(path: Path | None = None) -> dict:
    return _read_toml(path or config_path())


def provider_config(provider: str, path: Path | None = None) -> dict:
    """The `[provider]` table of config.toml ({} when absent); checks that it is a table."""
    cfg = load_config(path)
    section = cfg.get(provider, {})
    if not isinstance(section, dict):
        raise AgentConfigError(f"{path or config_path()}: [{provider}] must be a table")
    return section


def resolve_key(provider: str, env_names: tuple[str, ...], section: Mapping[str, Any],
                required: bool = True) -> str | None:
    """A key from the environment first, else config.toml. The message names both places."""
    for name in env_names:
        value = os.environ.get(name)
        if value:
            return value
    value = section.get("api_key")
    if isinstance(value, str) and value:
        return value
    if required:
        envs = " or ".join(env_names)
        raise AgentConfigError(
            f"{provider}: no API key: set {envs}, or api_key in [{provider}] of {config_path()}")
    return None


def redact(text: str, secrets: tuple[str, ...]) -> str:
    for s in secrets:
        if s and len(s) >= 8:
            text = text.replace(s, "[redacted]")
    return text


# -- prices, cost, budget ---------------------------------------------------------------------

@dataclass(frozen=True)
class Price:
    """USD per million tokens. cache_read/cache_write default to the input rate (no discount)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    long_threshold: int | None = None  # a prompt above this many tokens is billed at `long`
    long: "Price | None" = None

    def cost(self, input_tokens: int, cached_tokens: int, cache_write_tokens: int,
             output_tokens: int) -> float:
        """input_tokens counts every prompt token, cached and cache-written ones included."""
        p = self.long if (self.long and self.long_threshold is not None
                          and input_tokens > self.long_threshold) else self
        read = p.input if p.cache_read is None else p.cache_read
        write = p.input if p.cache_write is None else p.cache_write
        plain = max(0, input_tokens - cached_tokens - cache_write_tokens)
        return (plain * p.input + cached_tokens * read + cache_write_tokens * write
                + output_tokens * p.output) / 1e6


_DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")


def _price_from(table: Any, where: str) -> Price:
    if not isinstance(table, dict):
        raise AgentConfigError(f"{where}: must be a table with input and output")
    nums = {}
    for k in ("input", "output", "cache_read", "cache_write"):
        v = table.get(k)
        if v is None:
            continue
        if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0:
            raise AgentConfigError(f"{where}.{k}: must be a number >= 0 (USD per million tokens)")
        nums[k] = float(v)
    if "input" not in nums or "output" not in nums:
        raise AgentConfigError(f"{where}: needs input and output (USD per million tokens)")
    long, threshold = None, None
    if "long_prompt" in table:
        lp = table["long_prompt"]
        long = _price_from(lp, f"{where}.long_prompt")
        threshold = lp.get("threshold_tokens") if isinstance(lp, dict) else None
        if not isinstance(threshold, int) or threshold <= 0:
            raise AgentConfigError(f"{where}.long_prompt.threshold_tokens: must be a positive integer")
    return Price(nums["input"], nums["output"], nums.get("cache_read"), nums.get("cache_write"),
                 threshold, long)


class PriceTable:
    """prices.toml: `[provider."model-id"]` tables. The user's copy overrides the built-in per model."""

    def __init__(self, prices: dict[str, dict[str, Price]], sources: list[Path]):
        self.prices, self.sources = prices, sources

    @classmethod
    def load(cls, paths: list[Path] | None = None) -> "PriceTable":
        if paths is None:
            paths = [BUILTIN_PRICES, config_dir() / "prices.toml"]
            extra = os.environ.get("WARPSMITH_PRICES")
            if extra:
                paths.append(Path(extra))
        prices: dict[str, dict[str, Price]] = {}
        used = []
        for path in paths:
            data = _read_toml(path)
            if not data:
                continue
            used.append(path)
            for provider, models in data.items():
                if not isinstance(models, dict):
                    raise AgentConfigError(f"{path}: [{provider}] must hold one table per model")
                for model, table in models.items():
                    prices.setdefault(provider, {})[model] = _price_from(
                        table, f"{path}: {provider}.{model!r}")
        return cls(prices, used)

    def lookup(self, provider: str, model: str) -> Price | None:
        """Exact id, else the id without a date suffix (claude-x-20251001, gpt-x-2026-04-23)."""
        table = self.prices.get(provider, {})
        if model in table:
            return table[model]
        base = _DATE_SUFFIX.sub("", model)
        return table.get(base)


class Budget:
    """Tokens and dollars of a whole session, shared by every agent and thread that spends them.

    The loop reads `exhausted` before each proposal; agents also check it before each request.
    """

    def __init__(self, limit_usd: float | None = None):
        if limit_usd is not None and limit_usd < 0:
            raise ValueError("--budget-usd must be >= 0")
        self.limit_usd = limit_usd
        self._lock = threading.Lock()
        self.spent_usd = 0.0
        self.input_tokens = self.output_tokens = self.cached_tokens = self.reasoning_tokens = 0
        self.requests = 0
        self._warned = False

    def crossed_warning(self, fraction: float = 0.8) -> bool:
        """True once, the first time spending reaches `fraction` of the limit."""
        with self._lock:
            if self._warned or self.limit_usd is None or self.spent_usd < fraction * self.limit_usd:
                return False
            self._warned = True
            return True

    def add(self, usage: UsageReport) -> None:
        with self._lock:
            self.spent_usd += usage.cost_usd
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cached_tokens += usage.cached_tokens
            self.reasoning_tokens += usage.reasoning_tokens
            self.requests += 1

    @property
    def exhausted(self) -> bool:
        return self.limit_usd is not None and self.spent_usd >= self.limit_usd

    @property
    def remaining_usd(self) -> float | None:
        return None if self.limit_usd is None else max(0.0, self.limit_usd - self.spent_usd)

    def summary(self) -> str:
        limit = "" if self.limit_usd is None else f" of ${self.limit_usd:g}"
        return (f"${self.spent_usd:.4f}{limit}; {self.input_tokens:,} in ({self.cached_tokens:,} cached)"
                f" / {self.output_tokens:,} out ({self.reasoning_tokens:,} reasoning)")

    def to_dict(self) -> dict:
        return {"limit_usd": self.limit_usd, "spent_usd": round(self.spent_usd, 6),
                "input_tokens": self.input_tokens, "output_tokens": self.output_tokens,
                "cached_tokens": self.cached_tokens, "reasoning_tokens": self.reasoning_tokens,
                "requests": self.requests}


# -- retries ----------------------------------------------------------------------------------

@dataclass
class RetryPolicy:
    max_retries: int = 5
    base_s: float = 1.0
    cap_s: float = 60.0
    max_retry_after_s: float = 600.0  # a server asking for longer than this is not waited for
    jitter: float = 0.5  # fraction of the backoff added at random, so parallel proposals spread out

    def delay(self, retry_index: int, retry_after: float | None, rng: random.Random) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after_s)
        backoff = min(self.cap_s, self.base_s * (2 ** retry_index))
        return backoff * (1.0 + self.jitter * rng.random())


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """retry-after-ms, then retry-after as seconds or an HTTP date."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000.0
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return float(ra)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class StreamDropped(Exception):
    """The stream ended before its terminal event (connection cut, proxy timeout)."""


class ProviderError(Exception):
    """An error the provider reported inside a 200 stream (OpenAI `error`/`response.failed`)."""

    def __init__(self, code: str | None, message: str):
        super().__init__(message)
        self.code, self.message = code or "", message


RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
RETRY_ERROR_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error",
                     "rate_limit_exceeded", "server_error", "server_is_overloaded", "slow_down"}


@dataclass
class Failure:
    kind: str  # retry | fatal | bad-request
    message: str
    status: int | None = None
    retry_after: float | None = None


def _error_type(body: Any) -> str | None:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            t = err.get("type") or err.get("code")
            return str(t) if t else None
    return None


def _error_message(exc: Exception) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return err["message"]
    return str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__


def classify(exc: BaseException) -> Failure:
    """Sort an SDK or transport exception into retry / fatal / bad-request, duck-typed so that
    anthropic's and openai's exception classes (both over httpx2) need no separate code."""
    import httpx2  # here, not at the top: the offline tuner's start (preflight imports this module) needs no HTTP client

    name = type(exc).__name__
    if isinstance(exc, StreamDropped):
        return Failure("retry", f"stream dropped ({exc})")
    if isinstance(exc, ProviderError):
        kind = "retry" if exc.code in RETRY_ERROR_TYPES or not exc.code else "fatal"
        return Failure(kind, f"{exc.code or 'error'}: {exc.message}")
    status = getattr(exc, "status_code", None)
    response = getattr(exc, "response", None)
    if isinstance(status, int) and response is not None:
        headers = getattr(response, "headers", None)
        msg = _error_message(exc)
        etype = _error_type(getattr(exc, "body", None))
        if status < 400:  # an error event inside a 200 stream (Anthropic overloaded_error, ...)
            kind = "retry" if etype in RETRY_ERROR_TYPES or etype is None else "fatal"
            return Failure(kind, f"{etype or 'error'} in stream: {msg}", status)
        if status in RETRY_STATUS or status >= 500:
            return Failure("retry", f"HTTP {status}: {msg}", status, parse_retry_after(headers))
        if status in (400, 422):
            return Failure("bad-request", f"HTTP {status}: {msg}", status)
        return Failure("fatal", f"HTTP {status}: {msg}", status)
    if "Timeout" in name or isinstance(exc, httpx2.TimeoutException):
        return Failure("retry", "request timed out")
    if "Connection" in name or isinstance(exc, httpx2.TransportError):
        cause = exc.__cause__ or exc.__context__
        detail = f" ({type(cause).__name__}: {cause})" if cause else ""
        return Failure("retry", f"connection failed or dropped{detail}")
    return Failure("fatal", f"{name}: {exc}")


# -- candidate extraction ---------------------------------------------------------------------

SUBMIT_TOOL_NAME = "submit_kernel"
SUBMIT_TOOL_DESCRIPTION = (
    "Submit exactly one candidate: the complete Python source of the kernel module (it replaces the "
    "incumbent file as a whole and must define the task's entry function), and a short rationale.")
SUBMIT_TOOL_SCHEMA: dict = {
    "type": "object",
    "properties": {
        "source": {"type": "string", "description": "Complete Python source of the candidate module."},
        "rationale": {"type": "string",
                      "description": "One or two sentences: what changed and why it should be faster."},
    },
    "required": ["source", "rationale"],
    "additionalProperties": False,
}

# A fence opens with ``` or ~~~ (3 or more) and an optional info string; it closes with the same run.
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`]*)[^\n]*\n(?P<body>.*?)^[ \t]*(?P=fence)[ \t]*$",
                    re.M | re.S)
PYTHON_LANGS = {"", "python", "py", "python3"}


@dataclass
class ToolCall:
    name: str
    arguments: str  # raw JSON text as streamed
    id: str = ""


@dataclass
class Candidate:
    source: str
    description: str
    via: str  # tool | fenced
    rationale: str = ""


class ExtractionError(Exception):
    """The answer held no usable candidate; str() is the feedback sent to the model."""


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    return [(m.group("lang").lower(), m.group("body")) for m in _FENCE.finditer(text)]


def _unfence(source: str) -> str:
    """Models sometimes wrap the tool's source in a fence; take the inside."""
    blocks = fenced_blocks(source.strip() + "\n")
    if len(blocks) == 1 and source.lstrip().startswith(("```", "~~~")):
        return blocks[0][1]
    return source


def _check_source(source: str, entry: str) -> None:
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ExtractionError(f"the source does not parse: line {e.lineno}: {e.msg}") from None
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    if entry and entry not in names:
        raise ExtractionError(f"the source defines no top-level `{entry}` (the task's entry function)")


def _first_line(text: str, limit: int = 160) -> str:
    for line in text.strip().splitlines():
        line = line.strip().lstrip("#*- ").strip()
        if line and not line.startswith(("```", "~~~")):
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def extract_candidate(text: str, tool_calls: list[ToolCall], entry: str) -> Candidate:
    """A submit_kernel call if there is one, else exactly one fenced python block of the text."""
    calls = [c for c in tool_calls if c.name == SUBMIT_TOOL_NAME]
    others = [c.name for c in tool_calls if c.name != SUBMIT_TOOL_NAME]
    if len(calls) > 1:
        raise ExtractionError(f"you called {SUBMIT_TOOL_NAME} {len(calls)} times; call it exactly once")
    if calls:
        try:
            args = json.loads(calls[0].arguments or "{}")
        except json.JSONDecodeError as e:
            raise ExtractionError(f"the {SUBMIT_TOOL_NAME} arguments are not valid JSON ({e.msg} at "
                                  f"char {e.pos}); the answer may have been cut off") from None
        if not isinstance(args, dict):
            raise ExtractionError(f"the {SUBMIT_TOOL_NAME} arguments must be an object")
        source = args.get("source")
        if not isinstance(source, str) or not source.strip():
            raise ExtractionError(f"{SUBMIT_TOOL_NAME} was called without a non-empty `source` string")
        source = _unfence(source)
        _check_source(source, entry)
        rationale = args.get("rationale") if isinstance(args.get("rationale"), str) else ""
        desc = _first_line(rationale) or _first_line(text) or "candidate from the model"
        return Candidate(source, desc, "tool", rationale.strip())
    if others:
        raise ExtractionError(f"unknown tool {others[0]!r}; the only tool is {SUBMIT_TOOL_NAME}")
    blocks = fenced_blocks(text)
    python = [b for lang, b in blocks if lang in PYTHON_LANGS]
    if not python:
        what = "no fenced code block" if not blocks else f"no python block (found: {', '.join(l or 'untagged' for l, _ in blocks)})"
        raise ExtractionError(f"the answer has {what}")
    if len(python) > 1:
        raise ExtractionError(f"the answer has {len(python)} python code blocks; give exactly one, "
                              "holding the complete module")
    source = python[0]
    _check_source(source, entry)
    before = text.split("```", 1)[0] if "```" in text else ""
    desc = _first_line(before) or "candidate from the model"
    return Candidate(source, desc, "fenced", before.strip())


def feedback_for(problem: str, entry: str, tools: bool) -> str:
    how = (f"call the {SUBMIT_TOOL_NAME} tool once with the complete module source" if tools
           else "put the complete module in exactly one ```python fenced block")
    return (f"Your answer could not be used: {problem}. Reply again with exactly one candidate: {how}. "
            f"It must define `{entry}` and be the whole file, not a diff.")


# -- transcripts ------------------------------------------------------------------------------

class Transcript:
    """One proposal's prompt, reasoning and answer as Markdown, written when the proposal ends
    (a finally block, so a cancelled or failed proposal is on disk too). Keys are redacted."""

    _lock = threading.Lock()
    _seq = 0

    def __init__(self, folder: Path | None, label: str, model: str, iteration: int,
                 secrets: tuple[str, ...] = ()):
        self.folder, self.label, self.model, self.iteration = folder, label, model, iteration
        self.secrets = secrets
        self.parts: list[tuple[str, str]] = []
        self.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        self.path: Path | None = None
        if folder is not None:
            with Transcript._lock:
                Transcript._seq += 1
                seq = Transcript._seq
            safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
            self.path = Path(folder) / f"iter-{iteration:04d}-{safe}-{os.getpid()}-{seq:03d}.md"

    def add(self, title: str, text: str) -> None:
        self.parts.append((title, text))

    def write(self) -> Path | None:
        if self.path is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        out = [f"# {self.label} · {self.model} · iteration {self.iteration}", "",
               f"started {self.started}, ended {time.strftime('%Y-%m-%dT%H:%M:%S%z')}", ""]
        for title, text in self.parts:
            fence = "````" if "```" in text else "```"
            out += [f"## {title}", "", fence + "text", text.rstrip("\n"), fence, ""]
        self.path.write_text(redact("\n".join(out), self.secrets), encoding="utf-8")
        return self.path


# -- the shared propose() machinery -----------------------------------------------------------

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

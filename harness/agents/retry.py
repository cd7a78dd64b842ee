"""Failures and retries: sort an SDK or transport exception into retry / fatal / bad-request, and how
long to wait before the next try (the server's retry-after, else backoff with jitter).

Both provider SDKs run with their own retries off; LLMAgent (llm.py) retries with this, so that every
retry is a visible Notice. Only llm.py and the provider modules import this one, so the HTTP client
it needs (httpx2) is no dependency of the tuner, the registry or the preflight.
"""
from __future__ import annotations

import email.utils
import random
import time
from dataclasses import dataclass
from typing import Any, Mapping

import httpx2


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

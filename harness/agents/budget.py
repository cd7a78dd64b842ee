"""What the tokens cost and what the session may spend: prices.toml (built-in, then the user's copy),
the cost of one request, and the session's Budget that every agent and thread draws on.
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.agents.base import UsageReport
from harness.agents.config import AgentConfigError, read_toml
from harness.authoring.paths import config_dir

BUILTIN_PRICES = Path(__file__).with_name("prices.toml")


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
            data = read_toml(path)
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

"""`--agent SPEC` → an Agent.

    tuner                          the offline knob tuner (default)
    script:DIR                     replay prepared candidates from DIR
    anthropic[:MODEL]              Claude via the Messages API (ANTHROPIC_API_KEY)
    openai[:MODEL]                 OpenAI via the Responses API (OPENAI_API_KEY, OPENAI_BASE_URL)
    openai-compat:URL[#MODEL]      a local OpenAI-compatible server (vLLM, SGLang, Ollama, llama.cpp)

Provider modules are imported only when named, so `tuner` runs without the SDKs' import cost.
Options for LLM agents (budget or budget_usd, transcript_dir, prices, retry, http_client, ...) are
keyword arguments; tuner and script ignore them. An LLM agent's `budget` (a budget.Budget) is what the
loop consults: `agent.budget.exhausted`, `agent.budget.spent_usd`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.agents.base import Agent
from harness.agents.budget import Budget
from harness.agents.config import AgentConfigError
from harness.agents.script import ScriptAgent

KINDS = ("tuner", "script:DIR", "anthropic:MODEL", "openai:MODEL", "openai-compat:URL[#MODEL]")


class AgentSpecError(AgentConfigError):
    """A --agent value that names no agent; str() says what the valid forms are."""


def parse_spec(spec: str) -> tuple[str, str]:
    spec = spec.strip()
    kind, sep, rest = spec.partition(":")
    kind = kind.lower()
    if kind not in ("tuner", "script", "anthropic", "openai", "openai-compat"):
        raise AgentSpecError(f"--agent {spec!r}: unknown agent; use one of {', '.join(KINDS)}")
    if kind in ("script", "openai-compat") and not rest:
        form = "script:DIR" if kind == "script" else "openai-compat:URL[#MODEL]"
        raise AgentSpecError(f"--agent {spec!r}: needs {form}")
    if kind == "tuner" and rest:
        raise AgentSpecError(f"--agent {spec!r}: the tuner takes no argument")
    return kind, rest


def make_agent(spec: str, **opts: Any) -> Agent:
    kind, rest = parse_spec(spec)
    session_dir = opts.pop("session_dir", None)  # where the tuner keeps its studies; others ignore it
    # Each agent's module is imported when that agent is made: the LLM agents bring their SDK clients
    # (optional, and slow to import), and `warpsmith --help` needs none of them.
    if kind == "tuner":
        from harness.agents.tuner import TunerAgent  # tree-sitter and the tuner's search: ~20 ms an LLM run skips

        return TunerAgent(session_dir)
    if kind == "script":
        try:
            return ScriptAgent(Path(rest).expanduser())
        except FileNotFoundError as e:
            raise AgentSpecError(str(e)) from None
    budget_usd = opts.pop("budget_usd", None)
    if "budget" not in opts:
        opts["budget"] = Budget(budget_usd)
    elif budget_usd is not None:
        raise AgentSpecError("give either budget= or budget_usd=, not both")
    try:
        if kind == "anthropic":
            from harness.agents.anthropic import AnthropicAgent  # the anthropic SDK: ~1.3 s to import

            return AnthropicAgent(rest, **opts)
        if kind == "openai":
            from harness.agents.openai import OpenAIAgent  # the openai SDK: ~0.5 s to import

            return OpenAIAgent(rest, **opts)
        from harness.agents.openai import OpenAICompatAgent  # the openai SDK, as above

        url, _, model = rest.partition("#")
        return OpenAICompatAgent(url, model, **opts)
    except TypeError as e:  # an option this agent does not take: a caller's mistake, said plainly
        raise AgentSpecError(f"--agent {spec!r}: {e}") from None

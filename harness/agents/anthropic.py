"""Anthropic Messages API agent: streamed extended thinking, text, and the submit_kernel tool.

One request = one `messages.create(stream=True)`; the raw events are read directly (thinking_delta,
text_delta, input_json_delta) so that reasoning reaches the screen as it is produced. The system part
and the stable prefix of the prompt carry `cache_control`, so iterations after the first read the
packs and task from the prompt cache. The SDK's own retries are off: the shared loop in llm.py retries,
so that every retry is a visible Notice.
"""
from __future__ import annotations

from typing import Any, Iterator

import anthropic
import httpx2

from harness.agents.base import AgentEvent, ProposalContext, ReasoningChunk
from harness.agents.config import AgentConfigError, config_path, provider_config, resolve_key
from harness.agents.extract import SUBMIT_TOOL_DESCRIPTION, SUBMIT_TOOL_NAME, SUBMIT_TOOL_SCHEMA, ToolCall
from harness.agents.llm import Answer, Conversation, LLMAgent, cancel_watch, http_timeout, tool_chunk
from harness.agents.retry import Failure

DEFAULT_MODEL = "claude-opus-5-5"
# Models that predate adaptive thinking take {"type": "enabled", "budget_tokens": N}; the newer ones
# warn about (Opus 4.6) or reject (Sonnet 5: HTTP 400) that form and take {"type": "adaptive"}.
_MANUAL_THINKING_PREFIXES = ("claude-3", "claude-opus-4-", "claude-sonnet-4-", "claude-haiku-4-")
_ADAPTIVE_OK_4X = ("claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8", "claude-sonnet-4-6")


def default_thinking(model: str) -> str:
    if model.startswith(_ADAPTIVE_OK_4X):
        return "adaptive"
    if model.startswith(_MANUAL_THINKING_PREFIXES):
        return "enabled"
    return "adaptive"


class AnthropicAgent(LLMAgent):
    name = "anthropic"
    key_env = "ANTHROPIC_API_KEY"
    provider = "anthropic"

    def __init__(self, model: str = "", *, api_key: str | None = None, base_url: str | None = None,
                 max_tokens: int | None = None, thinking: str | None = None, thinking_budget: int | None = None,
                 effort: str | None = None, read_timeout_s: float | None = None,
                 http_client: httpx2.Client | None = None, **common: Any):
        section = provider_config("anthropic")
        model = model or section.get("model") or DEFAULT_MODEL
        key = api_key or resolve_key("anthropic", ("ANTHROPIC_API_KEY",), section)
        super().__init__(model, secrets=(key or "",), **common)
        self.max_tokens = int(max_tokens or section.get("max_tokens", 32000))
        self.thinking = thinking or section.get("thinking") or default_thinking(model)
        if self.thinking not in ("adaptive", "enabled", "off"):
            raise AgentConfigError(f"anthropic: thinking must be adaptive, enabled or off "
                                   f"(got {self.thinking!r}; see [anthropic] in {config_path()})")
        self.thinking_budget = int(thinking_budget or section.get("thinking_budget", 16000))
        if self.thinking == "enabled" and not (1024 <= self.thinking_budget < self.max_tokens):
            raise AgentConfigError(f"anthropic: thinking_budget must be >= 1024 and below max_tokens "
                                   f"({self.max_tokens}); got {self.thinking_budget}")
        self.effort = effort or section.get("effort")
        # Ask for summarized thinking where the field exists (newer models may default to omitting it);
        # older models never had it. A model that refuses it gets it dropped once (_on_bad_request).
        self._display = default_thinking(model) == "adaptive"
        timeout = http_timeout(float(read_timeout_s or section.get("read_timeout_s", 300)))
        self.client = anthropic.Anthropic(api_key=key, base_url=base_url or section.get("base_url") or None,
                                          max_retries=0, timeout=timeout, http_client=http_client)

    def _thinking_param(self) -> dict | None:
        if self.thinking == "off":
            return None
        param: dict[str, Any] = ({"type": "enabled", "budget_tokens": self.thinking_budget}
                                 if self.thinking == "enabled" else {"type": "adaptive"})
        if self._display:
            param["display"] = "summarized"
        return param

    def _messages(self, conv: Conversation) -> list[dict]:
        cache = {"type": "ephemeral"}
        if conv.cut:
            first = [{"type": "text", "text": conv.prompt[: conv.cut], "cache_control": cache},
                     {"type": "text", "text": conv.prompt[conv.cut:]}]
        else:
            first = [{"type": "text", "text": conv.prompt}]
        if conv.turns:
            # Breakpoint at the end of the whole prompt too: a feedback round re-reads it from cache.
            first[-1] = {**first[-1], "cache_control": cache}
        messages: list[dict] = [{"role": "user", "content": first}]
        for turn in conv.turns:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": turn.assistant}]})
            messages.append({"role": "user", "content": [{"type": "text", "text": turn.feedback}]})
        return messages

    def request_params(self, conv: Conversation) -> dict:
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": self._messages(conv),
            "tools": [{"name": SUBMIT_TOOL_NAME, "description": SUBMIT_TOOL_DESCRIPTION,
                       "input_schema": SUBMIT_TOOL_SCHEMA}],
            # auto, not forced: forced tool use is refused with thinking on (and on Sonnet 5.5).
            "tool_choice": {"type": "auto"},
        }
        if conv.system:
            params["system"] = [{"type": "text", "text": conv.system, "cache_control": {"type": "ephemeral"}}]
        thinking = self._thinking_param()
        if thinking:
            params["thinking"] = thinking
        if self.effort:
            params["output_config"] = {"effort": self.effort}
        return params

    def _stream(self, ctx: ProposalContext, conv: Conversation, answer: Answer) -> Iterator[AgentEvent]:
        blocks: dict[int, dict] = {}
        stream = self.client.messages.create(stream=True, **self.request_params(conv))
        with stream, cancel_watch(ctx.cancel, stream):
            for event in stream:
                if ctx.cancel.is_set():
                    break
                kind = event.type
                if kind == "message_start":
                    u = event.message.usage
                    answer.cache_write_tokens = u.cache_creation_input_tokens or 0
                    answer.cached_tokens = u.cache_read_input_tokens or 0
                    # The API's input_tokens excludes cache reads and writes; ours counts every prompt token.
                    answer.input_tokens = (u.input_tokens or 0) + answer.cache_write_tokens + answer.cached_tokens
                    answer.output_tokens = u.output_tokens or 0
                elif kind == "content_block_start":
                    block = event.content_block
                    blocks[event.index] = {"type": block.type, "name": getattr(block, "name", ""),
                                           "id": getattr(block, "id", ""), "json": []}
                elif kind == "content_block_delta":
                    d = event.delta
                    if d.type == "thinking_delta":
                        answer.reasoning += d.thinking
                        yield ReasoningChunk(d.thinking, "reasoning")
                    elif d.type == "text_delta":
                        answer.text += d.text
                        yield ReasoningChunk(d.text, "message")
                    elif d.type == "input_json_delta":
                        blocks.setdefault(event.index, {"type": "tool_use", "name": "", "id": "", "json": []})
                        blocks[event.index]["json"].append(d.partial_json)
                elif kind == "content_block_stop":
                    b = blocks.get(event.index)
                    if b and b["type"] == "tool_use":
                        call = ToolCall(b["name"], "".join(b["json"]), b["id"])
                        answer.tool_calls.append(call)
                        yield tool_chunk(call.name, call.arguments)
                elif kind == "message_delta":
                    if event.delta.stop_reason:
                        answer.stop_reason = event.delta.stop_reason
                    u = event.usage
                    if u is not None:
                        answer.output_tokens = u.output_tokens or answer.output_tokens
                        details = getattr(u, "output_tokens_details", None)
                        if details is not None and getattr(details, "thinking_tokens", None) is not None:
                            answer.reasoning_tokens = details.thinking_tokens
                        # message_delta usage is cumulative; it may restate the input side.
                        if getattr(u, "cache_read_input_tokens", None) is not None:
                            answer.cached_tokens = u.cache_read_input_tokens
                        if getattr(u, "cache_creation_input_tokens", None) is not None:
                            answer.cache_write_tokens = u.cache_creation_input_tokens
                        if getattr(u, "input_tokens", None) is not None:
                            answer.input_tokens = u.input_tokens + answer.cached_tokens + answer.cache_write_tokens
                elif kind == "message_stop":
                    answer.complete = True

    def _on_bad_request(self, failure: Failure, exc: BaseException) -> str | None:
        """Thinking options differ per model generation; adapt once rather than stop the session."""
        msg = failure.message.lower()
        if self._display and self.thinking != "off" and "display" in msg:
            self._display = False
            return f"{self.model} refused thinking.display ({failure.message}); retrying without it"
        if "thinking" in msg or "adaptive" in msg or "budget_tokens" in msg:
            if self.thinking == "adaptive" and not getattr(self, "_tried_enabled", False):
                self._tried_enabled = True
                self.thinking = "enabled"
                return f"{self.model} refused adaptive thinking ({failure.message}); retrying with budget_tokens"
            if self.thinking == "enabled" and not getattr(self, "_tried_adaptive", False):
                self._tried_adaptive = True
                self.thinking = "adaptive"
                return f"{self.model} refused manual thinking ({failure.message}); retrying with adaptive thinking"
        return None

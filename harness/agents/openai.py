"""OpenAI agents.

`openai:MODEL` talks to the Responses API and streams reasoning summaries
(`response.reasoning_summary_text.delta`), text and the submit_kernel function call's arguments.

`openai-compat:URL[#MODEL]` talks Chat Completions to a server on the GPU box (vLLM, SGLang, Ollama,
llama.cpp) and streams `delta.reasoning_content` (or `delta.reasoning`, or `<think>` tags in the text).
It offers the submit_kernel tool; a server that refuses tools (vLLM without --enable-auto-tool-choice,
say) answers 400, and the agent drops tools for the rest of the session and asks for a fenced block.
Its key never comes from OPENAI_API_KEY: that key must not leak to a third-party server.
"""
from __future__ import annotations

import threading
from typing import Any, Iterator
from urllib.parse import urlparse

import httpx2
import openai

from harness.agents.base import AgentEvent, ProposalContext, ReasoningChunk
from harness.agents.config import AgentConfigError, config_path, provider_config, resolve_key
from harness.agents.extract import SUBMIT_TOOL_DESCRIPTION, SUBMIT_TOOL_NAME, SUBMIT_TOOL_SCHEMA, ToolCall
from harness.agents.llm import Answer, Conversation, LLMAgent, cancel_watch, http_timeout, tool_chunk
from harness.agents.retry import Failure, ProviderError

DEFAULT_MODEL = "gpt-5.5"


def _messages(conv: Conversation) -> list[dict]:
    """The prompt and each feedback round as role/content messages, a form both OpenAI APIs take."""
    items: list[dict] = [{"role": "user", "content": conv.prompt}]
    for turn in conv.turns:
        items.append({"role": "assistant", "content": turn.assistant})
        items.append({"role": "user", "content": turn.feedback})
    return items


def _count(answer: Answer, input_tokens: int | None, output_tokens: int | None, input_details: Any,
           output_details: Any) -> None:
    """Usage as both OpenAI APIs report it (Responses: input_tokens; Chat Completions: prompt_tokens, the
    same figures under other names): input counts the cached tokens, output the reasoning ones."""
    answer.input_tokens = input_tokens or 0
    answer.output_tokens = output_tokens or 0
    answer.cached_tokens = getattr(input_details, "cached_tokens", 0) or 0
    answer.reasoning_tokens = getattr(output_details, "reasoning_tokens", 0) or 0


class OpenAIAgent(LLMAgent):
    name = "openai"
    key_env = "OPENAI_API_KEY"
    provider = "openai"

    def __init__(self, model: str = "", *, api_key: str | None = None, base_url: str | None = None,
                 effort: str | None = None, reasoning_summary: str | None = None,
                 max_output_tokens: int | None = None, read_timeout_s: float | None = None,
                 http_client: httpx2.Client | None = None, **common: Any):
        section = provider_config("openai")
        model = model or section.get("model") or DEFAULT_MODEL
        key = api_key or resolve_key("openai", ("OPENAI_API_KEY",), section)
        super().__init__(model, secrets=(key or "",), **common)
        self.effort = effort or section.get("effort")
        # "auto" asks for summaries; "off" sends no reasoning block (models without reasoning refuse it).
        self.reasoning_summary = reasoning_summary or section.get("reasoning_summary", "auto")
        self.max_output_tokens = max_output_tokens or section.get("max_output_tokens")
        self._cache_key = True
        # base_url: argument, then config, then OPENAI_BASE_URL (which the SDK reads itself).
        self.client = openai.OpenAI(api_key=key, base_url=base_url or section.get("base_url") or None,
                                    max_retries=0,
                                    timeout=http_timeout(float(read_timeout_s or section.get("read_timeout_s", 300))),
                                    http_client=http_client)

    def request_params(self, ctx: ProposalContext, conv: Conversation) -> dict:
        params: dict[str, Any] = {
            "model": self.model,
            "input": _messages(conv),
            "tools": [{"type": "function", "name": SUBMIT_TOOL_NAME, "description": SUBMIT_TOOL_DESCRIPTION,
                       "parameters": SUBMIT_TOOL_SCHEMA, "strict": True}],
            "tool_choice": "auto",
            "store": False,
        }
        if self._cache_key:
            # Same key for every request of a task: OpenAI routes them to the same prompt cache.
            params["prompt_cache_key"] = f"warpsmith-{ctx.task.name}"
        if conv.system:
            params["instructions"] = conv.system
        if self.reasoning_summary != "off":
            reasoning: dict[str, Any] = {"summary": self.reasoning_summary}
            if self.effort:
                reasoning["effort"] = self.effort
            params["reasoning"] = reasoning
        if self.max_output_tokens:
            params["max_output_tokens"] = int(self.max_output_tokens)
        return params

    def _stream(self, ctx: ProposalContext, conv: Conversation, answer: Answer) -> Iterator[AgentEvent]:
        calls: dict[str, dict] = {}  # item id -> {name, call_id, args}
        order: list[str] = []
        stream = self.client.responses.create(stream=True, **self.request_params(ctx, conv))
        with stream, cancel_watch(ctx.cancel, stream):
            for event in stream:
                if ctx.cancel.is_set():
                    break
                kind = event.type
                if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
                    answer.reasoning += event.delta
                    yield ReasoningChunk(event.delta, "reasoning")
                elif kind == "response.reasoning_summary_part.done":
                    answer.reasoning += "\n\n"
                    yield ReasoningChunk("\n\n", "reasoning")
                elif kind == "response.output_text.delta":
                    answer.text += event.delta
                    yield ReasoningChunk(event.delta, "message")
                elif kind == "response.output_item.added" and event.item.type == "function_call":
                    calls[event.item.id or str(event.output_index)] = {
                        "name": event.item.name, "call_id": event.item.call_id, "args": ""}
                    order.append(event.item.id or str(event.output_index))
                elif kind == "response.function_call_arguments.delta":
                    calls.setdefault(event.item_id, {"name": "", "call_id": "", "args": ""})
                    calls[event.item_id]["args"] += event.delta
                elif kind == "response.function_call_arguments.done":
                    calls.setdefault(event.item_id, {"name": "", "call_id": "", "args": ""})
                    calls[event.item_id]["args"] = event.arguments
                elif kind == "response.output_item.done" and event.item.type == "function_call":
                    key = event.item.id or str(event.output_index)
                    calls[key] = {"name": event.item.name, "call_id": event.item.call_id,
                                  "args": event.item.arguments}
                    if key not in order:
                        order.append(key)
                    yield tool_chunk(event.item.name, event.item.arguments)
                elif kind in ("response.completed", "response.incomplete"):
                    self._take_usage(event.response, answer)
                    if kind == "response.incomplete":
                        details = getattr(event.response, "incomplete_details", None)
                        answer.stop_reason = getattr(details, "reason", None) or "incomplete"
                    answer.complete = True
                elif kind == "response.failed":
                    self._take_usage(event.response, answer)
                    err = getattr(event.response, "error", None)
                    raise ProviderError(getattr(err, "code", None), getattr(err, "message", None) or "response failed")
                elif kind == "error":
                    raise ProviderError(event.code, event.message)
        answer.tool_calls = [ToolCall(calls[k]["name"], calls[k]["args"], calls[k]["call_id"]) for k in order
                             if k in calls]

    def _on_bad_request(self, failure: Failure, exc: BaseException) -> str | None:
        """Models without reasoning and proxies without prompt_cache_key refuse those fields: drop them."""
        msg = failure.message.lower()
        if self.reasoning_summary != "off" and "reasoning" in msg:
            self.reasoning_summary = "off"
            return f"{self.model} refused the reasoning options ({failure.message}); retrying without them"
        if self._cache_key and "prompt_cache_key" in msg:
            self._cache_key = False
            return f"the endpoint refused prompt_cache_key ({failure.message}); retrying without it"
        return None

    @staticmethod
    def _take_usage(response: Any, answer: Answer) -> None:
        u = getattr(response, "usage", None)
        if u is not None:
            _count(answer, u.input_tokens, u.output_tokens, getattr(u, "input_tokens_details", None),
                   getattr(u, "output_tokens_details", None))


def normalize_base_url(url: str) -> str:
    """http://host:8000 → http://host:8000/v1 (what vLLM, SGLang, Ollama and llama.cpp serve)."""
    p = urlparse(url)
    if p.scheme not in ("http", "https") or not p.netloc:
        raise AgentConfigError(f"openai-compat: {url!r} is not an http(s) URL; use e.g. "
                               "openai-compat:http://127.0.0.1:8000#MODEL")
    path = p.path.rstrip("/")
    if not path:
        path = "/v1"
    return p._replace(path=path).geturl()


class ThinkSplitter:
    """Routes `<think>…</think>` inside content to reasoning, across chunk boundaries (servers run
    without a reasoning parser put a reasoning model's thoughts in the text)."""

    OPEN, CLOSE = "<think>", "</think>"

    def __init__(self) -> None:
        self.inside = False
        self.pending = ""
        self.seen_text = False

    def feed(self, chunk: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        buf = self.pending + chunk
        self.pending = ""
        while buf:
            tag = self.CLOSE if self.inside else self.OPEN
            i = buf.find(tag)
            # An opening tag counts only before any answer text: later it is part of the answer.
            if i >= 0 and (self.inside or (not self.seen_text and not buf[:i].strip())):
                if buf[:i]:
                    out.append(("reasoning" if self.inside else "message", buf[:i]))
                buf = buf[i + len(tag):]
                self.inside = not self.inside
                continue
            hold = 0
            if self.inside or not self.seen_text:
                # Hold back a suffix that could be the start of a tag split across chunks.
                for k in range(min(len(tag) - 1, len(buf)), 0, -1):
                    if tag.startswith(buf[-k:]):
                        hold = k
                        break
            emit, self.pending = (buf[:-hold], buf[-hold:]) if hold else (buf, "")
            if emit:
                out.append(("reasoning" if self.inside else "message", emit))
                if not self.inside and emit.strip():
                    self.seen_text = True
            break
        return out

    def flush(self) -> list[tuple[str, str]]:
        rest, self.pending = self.pending, ""
        return [("reasoning" if self.inside else "message", rest)] if rest else []


class OpenAICompatAgent(LLMAgent):
    name = "openai-compat"
    provider = "openai-compat"

    def __init__(self, url: str, model: str = "", *, api_key: str | None = None, tools: bool | None = None,
                 max_tokens: int | None = None, read_timeout_s: float | None = None,
                 http_client: httpx2.Client | None = None, **common: Any):
        section = provider_config("openai-compat")
        # Never OPENAI_API_KEY here: it belongs to OpenAI, not to whatever server the URL names.
        key = api_key or resolve_key("openai-compat", ("WARPSMITH_COMPAT_API_KEY",), section, required=False)
        super().__init__(model or section.get("model") or "", secrets=(key or "",), **common)
        self.base_url = normalize_base_url(url)
        cfg_tools = section.get("tools")
        self._tools_ok: bool | None = tools if tools is not None else cfg_tools  # None: try, learn on 400
        self._usage_opt_ok = True
        self.max_tokens = max_tokens or section.get("max_tokens")
        self._model_lock = threading.Lock()
        self.client = openai.OpenAI(api_key=key or "none", base_url=self.base_url, max_retries=0,
                                    timeout=http_timeout(float(read_timeout_s or section.get("read_timeout_s", 600))),
                                    http_client=http_client)

    @property
    def uses_tools(self) -> bool:  # type: ignore[override]
        return self._tools_ok is not False

    @property
    def label(self) -> str:
        return f"openai-compat:{self.base_url}" + (f"#{self.model}" if self.model else "")

    def _ensure_model(self) -> None:
        """No #MODEL in the spec: ask the server (vLLM/SGLang serve one model; take the first)."""
        with self._model_lock:
            if self.model:
                return
            models = self.client.models.list()
            ids = [m.id for m in models.data]
            if not ids:
                raise AgentConfigError(f"{self.base_url}/models lists no model; give one as URL#MODEL")
            self.model = ids[0]

    def request_params(self, conv: Conversation) -> dict:
        system = [{"role": "system", "content": conv.system}] if conv.system else []
        params: dict[str, Any] = {"model": self.model, "messages": system + _messages(conv)}
        if self._usage_opt_ok:
            params["stream_options"] = {"include_usage": True}
        if self._tools_ok is not False:
            params["tools"] = [{"type": "function", "function": {
                "name": SUBMIT_TOOL_NAME, "description": SUBMIT_TOOL_DESCRIPTION, "parameters": SUBMIT_TOOL_SCHEMA}}]
            params["tool_choice"] = "auto"
        if self.max_tokens:
            params["max_tokens"] = int(self.max_tokens)
        return params

    def _stream(self, ctx: ProposalContext, conv: Conversation, answer: Answer) -> Iterator[AgentEvent]:
        self._ensure_model()
        calls: dict[int, dict] = {}
        think = ThinkSplitter()
        stream = self.client.chat.completions.create(stream=True, **self.request_params(conv))
        with stream, cancel_watch(ctx.cancel, stream):
            for chunk in stream:
                if ctx.cancel.is_set():
                    break
                if chunk.usage is not None:
                    u = chunk.usage
                    _count(answer, u.prompt_tokens, u.completion_tokens, getattr(u, "prompt_tokens_details", None),
                           getattr(u, "completion_tokens_details", None))
                for choice in chunk.choices:
                    d = choice.delta
                    extra = d.model_extra or {}
                    r = extra.get("reasoning_content") or extra.get("reasoning")
                    if isinstance(r, str) and r:
                        answer.reasoning += r
                        yield ReasoningChunk(r, "reasoning")
                    if d.content:
                        for channel, text in think.feed(d.content):
                            yield from self._route(answer, channel, text)
                    for tc in d.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"name": "", "id": "", "args": ""})
                        if tc.id:
                            slot["id"] = tc.id
                        if tc.function is not None:
                            if tc.function.name:
                                slot["name"] = tc.function.name
                            if tc.function.arguments:
                                slot["args"] += tc.function.arguments
                    if choice.finish_reason:
                        answer.stop_reason = choice.finish_reason
                        answer.complete = True
            for channel, text in think.flush():
                yield from self._route(answer, channel, text)
        answer.tool_calls = [ToolCall(c["name"], c["args"], c["id"]) for _, c in sorted(calls.items())]
        for c in answer.tool_calls:
            yield tool_chunk(c.name, c.arguments)

    @staticmethod
    def _route(answer: Answer, channel: str, text: str) -> Iterator[AgentEvent]:
        if channel == "reasoning":
            answer.reasoning += text
        else:
            answer.text += text
        yield ReasoningChunk(text, channel)

    def _on_bad_request(self, failure: Failure, exc: BaseException) -> str | None:
        msg = failure.message.lower()
        if self._usage_opt_ok and "stream_options" in msg:
            self._usage_opt_ok = False
            return "server refused stream_options; retrying without token usage (cost counts $0)"
        if self._tools_ok is not False:
            self._tools_ok = False
            return (f"server refused the request with tools ({failure.message}); "
                    "retrying without tools, asking for a fenced python block")
        return None

    def _fatal_message(self, failure: Failure) -> str:
        if failure.status in (401, 403):
            return (f"{self.label}: the server refused the key ({failure.status}: {failure.message}). "
                    f"Set WARPSMITH_COMPAT_API_KEY or api_key in [openai-compat] of {config_path()}.")
        if failure.status == 404:
            return (f"{self.label}: not found (404: {failure.message}). Check the URL (the server's "
                    f"OpenAI base, usually ending in /v1) and the model id after #.")
        return f"{self.label}: {failure.message}"

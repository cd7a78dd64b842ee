"""Hand-written SSE streams in the providers' wire formats, and a scripted httpx2 transport.

The anthropic and openai SDKs both sit on httpx2; their clients take `http_client=httpx2.Client(
transport=httpx2.MockTransport(handler))`, so the real SDK code parses these bytes.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import httpx2

from harness.agents.base import ReasoningChunk
from harness.agents.retry import RetryPolicy

FAST = RetryPolicy(max_retries=3, base_s=0.001, cap_s=0.01)
CANDIDATE = (Path(__file__).parent / "data" / "softmax_candidate.py").read_text()


def sse(events: Iterable[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        if name:
            out.append(f"event: {name}")
        out.append("data: " + (data if isinstance(data, str) else json.dumps(data)))
        out.append("")
    return ("\n".join(out) + "\n").encode()


def chunks(s: str, n: int) -> list[str]:
    size = max(1, -(-len(s) // n))
    return [s[i:i + size] for i in range(0, len(s), size)]


# -- Anthropic Messages -----------------------------------------------------------------------

def anthropic_events(thinking: list[str] = ("Rows fit in one block", "; read once."), text: str | None = None,
                     tool_args: str | None = None, input_tokens: int = 1000, cache_read: int = 0,
                     cache_write: int = 0, output_tokens: int = 800, thinking_tokens: int | None = None,
                     stop_reason: str = "end_turn", end: bool = True) -> list[tuple[str, Any]]:
    ev: list[tuple[str, Any]] = [("message_start", {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "cache_creation_input_tokens": cache_write,
                  "cache_read_input_tokens": cache_read, "output_tokens": 1}}})]
    ev.append(("ping", {"type": "ping"}))
    idx = 0
    if thinking:
        ev.append(("content_block_start", {"type": "content_block_start", "index": idx,
                                           "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
        for t in thinking:
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": idx,
                                               "delta": {"type": "thinking_delta", "thinking": t}}))
        ev.append(("content_block_delta", {"type": "content_block_delta", "index": idx,
                                           "delta": {"type": "signature_delta", "signature": "sig"}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
        idx += 1
    if text is not None:
        ev.append(("content_block_start", {"type": "content_block_start", "index": idx,
                                           "content_block": {"type": "text", "text": ""}}))
        for t in chunks(text, 3):
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": idx,
                                               "delta": {"type": "text_delta", "text": t}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
        idx += 1
    if tool_args is not None:
        ev.append(("content_block_start", {"type": "content_block_start", "index": idx, "content_block": {
            "type": "tool_use", "id": "toolu_1", "name": "submit_kernel", "input": {}}}))
        for part in chunks(tool_args, 5):
            ev.append(("content_block_delta", {"type": "content_block_delta", "index": idx,
                                               "delta": {"type": "input_json_delta", "partial_json": part}}))
        ev.append(("content_block_stop", {"type": "content_block_stop", "index": idx}))
        stop_reason = "tool_use"
    if not end:
        return ev
    usage: dict = {"output_tokens": output_tokens}
    if thinking_tokens is not None:
        usage["output_tokens_details"] = {"thinking_tokens": thinking_tokens}
    ev.append(("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop_reason,
                                                                    "stop_sequence": None}, "usage": usage}))
    ev.append(("message_stop", {"type": "message_stop"}))
    return ev


def tool_args(source: str = CANDIDATE, rationale: str = "Single-pass rows; exp2.") -> str:
    return json.dumps({"source": source, "rationale": rationale})


# -- OpenAI Responses -------------------------------------------------------------------------

def responses_events(summary: list[str] = ("Plan: **one pass**", " per row."), text: str | None = None,
                     fn_args: str | None = None, input_tokens: int = 2000, cached: int = 1500,
                     output_tokens: int = 900, reasoning_tokens: int = 600, status: str = "completed",
                     end: bool = True) -> list[tuple[str, Any]]:
    n = iter(range(10_000))
    ev: list[tuple[str, Any]] = [("response.created", {"type": "response.created", "sequence_number": next(n),
                                                       "response": {"id": "resp_1", "object": "response",
                                                                    "status": "in_progress", "output": []}})]
    ev.append(("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(n),
                                              "output_index": 0,
                                              "item": {"type": "reasoning", "id": "rs_1", "summary": []}}))
    for s in summary:
        ev.append(("response.reasoning_summary_text.delta", {
            "type": "response.reasoning_summary_text.delta", "sequence_number": next(n), "item_id": "rs_1",
            "output_index": 0, "summary_index": 0, "delta": s}))
    out_idx = 1
    if text is not None:
        ev.append(("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(n),
                                                  "output_index": out_idx, "item": {
                                                      "type": "message", "id": "msg_1", "role": "assistant",
                                                      "status": "in_progress", "content": []}}))
        for t in chunks(text, 3):
            ev.append(("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": next(n),
                                                      "item_id": "msg_1", "output_index": out_idx,
                                                      "content_index": 0, "delta": t, "logprobs": []}))
        out_idx += 1
    if fn_args is not None:
        item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "submit_kernel",
                "arguments": "", "status": "in_progress"}
        ev.append(("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(n),
                                                  "output_index": out_idx, "item": item}))
        for part in chunks(fn_args, 4):
            ev.append(("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "sequence_number": next(n), "item_id": "fc_1",
                "output_index": out_idx, "delta": part}))
        ev.append(("response.function_call_arguments.done", {
            "type": "response.function_call_arguments.done", "sequence_number": next(n), "item_id": "fc_1",
            "output_index": out_idx, "arguments": fn_args}))
        ev.append(("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(n),
                                                 "output_index": out_idx,
                                                 "item": {**item, "arguments": fn_args, "status": "completed"}}))
    if not end:
        return ev
    kind = "response.completed" if status == "completed" else "response.incomplete"
    resp: dict = {"id": "resp_1", "object": "response", "status": status, "output": [],
                  "usage": {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": cached},
                            "output_tokens": output_tokens,
                            "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
                            "total_tokens": input_tokens + output_tokens}}
    if status != "completed":
        resp["incomplete_details"] = {"reason": "max_output_tokens"}
    ev.append((kind, {"type": kind, "sequence_number": next(n), "response": resp}))
    return ev


# -- Chat Completions (OpenAI-compatible servers) ---------------------------------------------

def chat_chunk(delta: dict, finish: str | None = None, model: str = "fake-coder") -> dict:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def chat_events(reasoning: list[str] = ("The baseline loops", " twice over HBM."), text: str | None = None,
                tool_args_json: str | None = None, reasoning_field: str = "reasoning_content",
                prompt_tokens: int = 3000, completion_tokens: int = 1200, usage: bool = True,
                end: bool = True, model: str = "fake-coder", cached: int = 0,
                reasoning_tokens: int | None = None) -> list[tuple[None, Any]]:
    ev: list[tuple[None, Any]] = [(None, chat_chunk({"role": "assistant", "content": ""}, model=model))]
    for r in reasoning:
        ev.append((None, chat_chunk({reasoning_field: r}, model=model)))
    if text is not None:
        for t in chunks(text, 4):
            ev.append((None, chat_chunk({"content": t}, model=model)))
    finish = "stop"
    if tool_args_json is not None:
        ev.append((None, chat_chunk({"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {
            "name": "submit_kernel", "arguments": ""}}]}, model=model)))
        for part in chunks(tool_args_json, 4):
            ev.append((None, chat_chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}, model=model)))
        finish = "tool_calls"
    if not end:
        return ev
    ev.append((None, chat_chunk({}, finish, model=model)))
    if usage:
        u = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
             "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": {"cached_tokens": cached}}
        if reasoning_tokens is not None:
            u["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        ev.append((None, {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": model,
                          "choices": [], "usage": u}))
    ev.append((None, "[DONE]"))
    return ev


# -- a scripted transport ---------------------------------------------------------------------

class DropAfter(httpx2.SyncByteStream):
    """Sends `data`, then fails like a cut connection."""

    def __init__(self, data: bytes):
        self.data = data

    def __iter__(self) -> Iterator[bytes]:
        yield self.data
        raise httpx2.RemoteProtocolError("peer closed connection without sending complete message body")


class Slow(httpx2.SyncByteStream):
    """Sends one SSE event at a time with a pause; records close() (cancellation closes it)."""

    def __init__(self, data: bytes, pause_s: float = 0.05):
        self.parts = [p + b"\n\n" for p in data.split(b"\n\n") if p.strip()]
        self.pause_s = pause_s
        self.sent = 0
        self.closed = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        for p in self.parts:
            if self.closed.is_set():
                return
            self.sent += 1
            yield p
            time.sleep(self.pause_s)

    def close(self) -> None:
        self.closed.set()


Step = Callable[[httpx2.Request], httpx2.Response]


class Script:
    """A MockTransport handler that answers request i with steps[i] and records every request."""

    def __init__(self, *steps: Step | httpx2.Response | bytes):
        self.steps = list(steps)
        self.requests: list[httpx2.Request] = []
        self.bodies: list[dict] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        try:
            self.bodies.append(json.loads(request.content or b"{}"))
        except ValueError:
            self.bodies.append({})
        if not self.steps:
            raise AssertionError(f"unexpected request #{len(self.requests)}: {request.method} {request.url}")
        step = self.steps.pop(0)
        if isinstance(step, bytes):
            return ok_stream(step)
        if isinstance(step, httpx2.Response):
            return step
        return step(request)

    def client(self) -> httpx2.Client:
        return httpx2.Client(transport=httpx2.MockTransport(self))


def ok_stream(body: bytes | httpx2.SyncByteStream) -> httpx2.Response:
    headers = {"content-type": "text/event-stream"}
    if isinstance(body, bytes):
        return httpx2.Response(200, headers=headers, content=body)
    return httpx2.Response(200, headers=headers, stream=body)


def error(status: int, etype: str, message: str, headers: dict | None = None, openai_style: bool = False) -> httpx2.Response:
    body = ({"error": {"message": message, "type": etype, "code": etype}} if openai_style
            else {"type": "error", "error": {"type": etype, "message": message}})
    return httpx2.Response(status, headers={"content-type": "application/json", **(headers or {})}, json=body)


def timeout(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ReadTimeout("timed out", request=request)


# -- driving an agent ----------------------------------------------------------------------

def collect(agent, ctx, on_event=None) -> list:
    out = []
    for e in agent.propose(ctx):
        out.append(e)
        if on_event:
            on_event(e)
    return out


def of(events, cls):
    return [e for e in events if isinstance(e, cls)]


def reasoning(events, channel="reasoning") -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningChunk) and e.channel == channel)


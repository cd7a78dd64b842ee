"""The real openai SDK client against hand-written Responses API and Chat Completions streams."""
from __future__ import annotations


import httpx2
import pytest

from agent_streams import (CANDIDATE, FAST, Script, Slow, chat_events, collect, error, of, ok_stream, reasoning,
                           responses_events, sse, timeout, tool_args)
from harness.agents.base import Exhausted, Notice, Proposal, ReasoningChunk, UsageReport
from harness.agents.budget import Budget
from harness.agents.openai import OpenAIAgent, OpenAICompatAgent, ThinkSplitter, normalize_base_url

KEY = "sk-proj-test-0123456789abcdef"


def oa(script: Script, model="gpt-5.5", **kw) -> OpenAIAgent:
    kw.setdefault("retry", FAST)
    return OpenAIAgent(model, api_key=KEY, http_client=script.client(), **kw)


def compat(script: Script, url="http://127.0.0.1:8000", model="fake-coder", **kw) -> OpenAICompatAgent:
    kw.setdefault("retry", FAST)
    return OpenAICompatAgent(url, model, http_client=script.client(), **kw)


# -- Responses API ----------------------------------------------------------------------------

def test_reasoning_summary_and_function_call(ctx):
    script = Script(sse(responses_events(summary=["Plan: **one pass**", " per row."], fn_args=tool_args())))
    budget = Budget()
    events = collect(oa(script, effort="high", budget=budget), ctx)
    assert reasoning(events) == "Plan: **one pass** per row."
    [p] = of(events, Proposal)
    assert p.source == CANDIDATE and p.meta["via"] == "tool" and p.meta["model"] == "gpt-5.5"

    body = script.bodies[0]
    assert str(script.requests[0].url).endswith("/v1/responses")
    assert body["stream"] is True and body["store"] is False
    assert body["instructions"] == "SYSTEM PART"
    assert body["input"][0] == {"role": "user", "content": ctx.prompt}
    assert body["reasoning"] == {"summary": "auto", "effort": "high"}
    assert body["tools"][0]["name"] == "submit_kernel" and body["tools"][0]["strict"] is True
    assert body["prompt_cache_key"] == "warpsmith-softmax"

    [u] = of(events, UsageReport)
    # gpt-5.5: $5 in, $0.50 cached in, $30 out per million; reasoning tokens are inside output.
    assert u.cost_usd == pytest.approx((500 * 5 + 1500 * 0.5 + 900 * 30) / 1e6)
    assert (u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (2000, 1500, 900, 600)
    assert budget.spent_usd == pytest.approx(u.cost_usd)


def test_output_text_fenced_fallback(ctx):
    script = Script(sse(responses_events(text=f"Fewer passes.\n```py\n{CANDIDATE}```")))
    events = collect(oa(script), ctx)
    assert reasoning(events, "message").startswith("Fewer passes.")
    [p] = of(events, Proposal)
    assert p.meta["via"] == "fenced" and p.source == CANDIDATE


def test_incomplete_response_feeds_back_the_token_limit(ctx):
    script = Script(sse(responses_events(fn_args=tool_args()[:100], status="incomplete")),
                    sse(responses_events(fn_args=tool_args())))
    events = collect(oa(script), ctx)
    assert "output token limit" in of(events, Notice)[0].message
    second = script.bodies[1]["input"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert "[I called submit_kernel" in second[1]["content"]
    assert len(of(events, Proposal)) == 1


def test_failed_response_with_server_error_is_retried(ctx):
    failed = sse([("response.failed", {"type": "response.failed", "sequence_number": 1, "response": {
        "id": "r", "object": "response", "status": "failed", "output": [],
        "error": {"code": "server_error", "message": "The server had an error"}}})])
    script = Script(failed, sse(responses_events(fn_args=tool_args())))
    events = collect(oa(script), ctx)
    assert "server_error" in of(events, Notice)[0].message
    assert len(of(events, Proposal)) == 1


def test_rate_limit_then_success(ctx):
    script = Script(error(429, "rate_limit_exceeded", "Rate limit reached", {"retry-after-ms": "10"},
                          openai_style=True), timeout, sse(responses_events(fn_args=tool_args())))
    events = collect(oa(script), ctx)
    msgs = [n.message for n in of(events, Notice)]
    assert "HTTP 429: Rate limit reached" in msgs[0] and "retry-after" in msgs[0]
    assert "timed out" in msgs[1]
    assert len(of(events, Proposal)) == 1


def test_bad_key_is_fatal(ctx):
    script = Script(error(401, "invalid_api_key", "Incorrect API key provided", openai_style=True))
    [ex] = of(collect(oa(script), ctx), Exhausted)
    assert ex.fatal and "OPENAI_API_KEY" in ex.reason and "Incorrect API key" in ex.reason


def test_unknown_model_is_fatal(ctx):
    script = Script(error(404, "model_not_found", "The model `gpt-nope` does not exist", openai_style=True))
    [ex] = of(collect(oa(script, model="gpt-nope"), ctx), Exhausted)
    assert ex.fatal and "'gpt-nope' not found" in ex.reason


def test_model_without_a_price_warns_once_and_costs_zero(ctx):
    agent = oa(Script(sse(responses_events(fn_args=tool_args())), sse(responses_events(fn_args=tool_args()))),
               model="gpt-6-astra")
    first, second = collect(agent, ctx), collect(agent, ctx)
    warn = [n for n in of(first, Notice) if "no price" in n.message]
    assert len(warn) == 1 and "prices.toml" in warn[0].message
    assert not [n for n in of(second, Notice) if "no price" in n.message]
    assert of(first, UsageReport)[0].cost_usd == 0.0


def test_user_price_table_overrides_the_builtin(ctx, tmp_path, monkeypatch):
    cfg = tmp_path / "config"
    cfg.mkdir(exist_ok=True)
    (cfg / "prices.toml").write_text('[openai."gpt-5.5"]\ninput = 1.0\noutput = 2.0\n')
    events = collect(oa(Script(sse(responses_events(fn_args=tool_args(), cached=0)))), ctx)
    assert of(events, UsageReport)[0].cost_usd == pytest.approx((2000 * 1.0 + 900 * 2.0) / 1e6)


# -- OpenAI-compatible servers ----------------------------------------------------------------

def test_compat_streams_reasoning_content_and_tool_call(ctx):
    script = Script(sse(chat_events(reasoning=["The baseline loops", " twice."], tool_args_json=tool_args())))
    events = collect(compat(script), ctx)
    assert reasoning(events) == "The baseline loops twice."
    [p] = of(events, Proposal)
    assert p.source == CANDIDATE and p.meta["agent"] == "openai-compat"
    assert str(script.requests[0].url) == "http://127.0.0.1:8000/v1/chat/completions"
    body = script.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": "SYSTEM PART"}
    assert body["stream_options"] == {"include_usage": True} and body["tools"][0]["function"]["name"] == "submit_kernel"
    [u] = of(events, UsageReport)
    assert (u.input_tokens, u.output_tokens, u.cost_usd) == (3000, 1200, 0.0)
    assert not [n for n in of(events, Notice) if "price" in n.message]


def test_compat_counts_cached_and_reasoning_tokens_and_replays_a_feedback_round(ctx):
    script = Script(sse(chat_events(text="no code, sorry", cached=2500, reasoning_tokens=700)),
                    sse(chat_events(tool_args_json=tool_args(), usage=False)))
    events = collect(compat(script), ctx)
    [u] = of(events, UsageReport)
    assert (u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (3000, 2500, 1200, 700)
    second = script.bodies[1]["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "user"]
    assert second[1] == {"role": "user", "content": ctx.prompt} and second[2]["content"] == "no code, sorry"
    assert len(of(events, Proposal)) == 1


def test_compat_asks_the_server_for_its_model(ctx):
    models = httpx2.Response(200, json={"object": "list", "data": [{"id": "Qwen/Qwen3-Coder", "object": "model",
                                                                   "created": 0, "owned_by": "vllm"}]})
    script = Script(models, sse(chat_events(tool_args_json=tool_args(), model="Qwen/Qwen3-Coder")))
    agent = compat(script, url="http://127.0.0.1:8000/v1", model="")
    events = collect(agent, ctx)
    assert str(script.requests[0].url) == "http://127.0.0.1:8000/v1/models"
    assert script.bodies[1]["model"] == "Qwen/Qwen3-Coder" and agent.model == "Qwen/Qwen3-Coder"
    assert len(of(events, Proposal)) == 1


def test_compat_server_without_tools_falls_back_to_a_fenced_block(ctx):
    refuse = error(400, "BadRequestError", '"auto" tool choice requires --enable-auto-tool-choice',
                   openai_style=True)
    script = Script(refuse, sse(chat_events(text=f"Done.\n```python\n{CANDIDATE}```\n")),
                    sse(chat_events(text=f"```python\n{CANDIDATE}```\n")))
    agent = compat(script)
    events = collect(agent, ctx)
    assert "without tools" in of(events, Notice)[0].message
    assert "tools" not in script.bodies[1]
    assert of(events, Proposal)[0].meta["via"] == "fenced"
    collect(agent, ctx)  # learnt: the next proposal does not offer tools again
    assert "tools" not in script.bodies[2] and len(script.requests) == 3


def test_compat_think_tags_and_ollama_reasoning_field(ctx):
    text = f"<think>Two passes\nare wasteful.</think>Use one.\n```python\n{CANDIDATE}```"
    events = collect(compat(Script(sse(chat_events(reasoning=["via field "], reasoning_field="reasoning",
                                                   text=text)))), ctx)
    assert reasoning(events) == "via field Two passes\nare wasteful."
    assert reasoning(events, "message").startswith("Use one.")
    assert len(of(events, Proposal)) == 1


def test_compat_never_sends_the_openai_key(ctx, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-openai-key-must-not-leak")
    script = Script(sse(chat_events(tool_args_json=tool_args())))
    collect(compat(script), ctx)
    assert "sk-real-openai" not in script.requests[0].headers.get("authorization", "")


def test_compat_dropped_stream_without_finish_reason_is_retried(ctx):
    script = Script(sse(chat_events(tool_args_json=tool_args(), end=False)), sse(chat_events(tool_args_json=tool_args())))
    events = collect(compat(script), ctx)
    assert "stream dropped" in of(events, Notice)[0].message and len(of(events, Proposal)) == 1


def test_compat_cancel(ctx):
    body = Slow(sse(chat_events(reasoning=list("abcdefgh"), tool_args_json=tool_args())))
    events = collect(compat(Script(lambda r: ok_stream(body))), ctx,
                     lambda e: isinstance(e, ReasoningChunk) and ctx.cancel.set())
    assert not of(events, Proposal) and body.closed.is_set() and body.sent < len(body.parts)


def test_think_splitter_handles_tags_split_across_chunks():
    s = ThinkSplitter()
    out = []
    for piece in ["<thi", "nk>abc</th", "ink>x <think> stays"]:
        out += s.feed(piece)
    out += s.flush()
    joined = {}
    for ch, t in out:
        joined[ch] = joined.get(ch, "") + t
    assert joined == {"reasoning": "abc", "message": "x <think> stays"}


def test_normalize_base_url():
    assert normalize_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalize_base_url("http://h:11434/v1/") == "http://h:11434/v1"
    assert normalize_base_url("https://h/api/openai") == "https://h/api/openai"
    with pytest.raises(ValueError, match="not an http"):
        normalize_base_url("127.0.0.1:8000")


def test_model_without_reasoning_drops_the_reasoning_block(ctx):
    refuse = error(400, "unsupported_parameter", "Unsupported parameter: 'reasoning.summary' is not supported "
                   "with this model.", openai_style=True)
    script = Script(refuse, sse(responses_events(summary=[], fn_args=tool_args())))
    events = collect(oa(script, model="gpt-4.1"), ctx)
    assert "retrying without them" in of(events, Notice)[0].message
    assert "reasoning" not in script.bodies[1] and len(of(events, Proposal)) == 1


def test_a_key_echoed_in_an_error_is_redacted(ctx):
    script = Script(error(401, "invalid_api_key", f"Incorrect API key provided: {KEY}", openai_style=True))
    [ex] = of(collect(oa(script), ctx), Exhausted)
    assert KEY not in ex.reason and "[redacted]" in ex.reason

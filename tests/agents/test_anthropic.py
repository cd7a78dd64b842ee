"""The real anthropic SDK client against hand-written Messages API streams (httpx2.MockTransport)."""
from __future__ import annotations

import json

import pytest

from agent_streams import (CANDIDATE, FAST, DropAfter, Script, Slow, anthropic_events, collect, error, of,
                           ok_stream, reasoning, sse, timeout, tool_args)
from harness.agents.anthropic import AnthropicAgent, default_thinking
from harness.agents.base import Exhausted, Notice, Proposal, ReasoningChunk, UsageReport
from harness.agents.budget import Budget

KEY = "sk-ant-test-0123456789abcdef"


def agent(script: Script, model="claude-opus-5-5", **kw) -> AnthropicAgent:
    kw.setdefault("retry", FAST)
    return AnthropicAgent(model, api_key=KEY, http_client=script.client(), **kw)


def test_thinking_stream_and_tool_call_give_a_proposal(ctx, tmp_path):
    script = Script(sse(anthropic_events(thinking=["Rows fit", " in one block."], text="Submitting.",
                                         tool_args=tool_args())))
    events = collect(agent(script, transcript_dir=tmp_path / "tr"), ctx)

    assert reasoning(events) == "Rows fit in one block."
    assert reasoning(events, "message") == "Submitting."
    assert "submit_kernel" in reasoning(events, "tool")
    [p] = of(events, Proposal)
    assert p.source == CANDIDATE and p.meta["via"] == "tool"
    assert p.description == "Single-pass rows; exp2."
    # Reasoning comes before the proposal, as the TUI shows it.
    assert events.index(p) > max(i for i, e in enumerate(events) if isinstance(e, ReasoningChunk))

    body = script.bodies[0]
    assert body["stream"] is True and body["model"] == "claude-opus-5-5"
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["tool_choice"] == {"type": "auto"}
    assert body["tools"][0]["name"] == "submit_kernel"
    assert body["system"] == [{"type": "text", "text": "SYSTEM PART", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"][0]["content"][0]["text"].startswith("STABLE PACKS")
    h = script.requests[0].headers
    assert KEY in h.get("x-api-key", "") + h.get("authorization", "")

    text = (tmp_path / "tr").glob("iter-0003-anthropic-*.md").__next__().read_text()
    assert "Rows fit in one block." in text and "SYSTEM PART" in text and "INCUMBENT AND HISTORY" in text
    assert KEY not in text
    assert p.meta["transcript"].endswith(".md")


def test_explicit_prompt_cut_gets_its_own_cache_breakpoint(ctx):
    ctx.prompt_cut = ctx.prompt.index("---")  # what harness.prompt's `cut` would give
    script = Script(sse(anthropic_events(tool_args=tool_args())))
    collect(agent(script), ctx)
    content = script.bodies[0]["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": "STABLE PACKS AND TASK\n", "cache_control": {"type": "ephemeral"}}
    assert content[1]["text"].startswith("---") and "cache_control" not in content[1]


def test_fenced_block_fallback(ctx):
    text = f"Read each short row once.\n\n```python\n{CANDIDATE}```\n"
    script = Script(sse(anthropic_events(text=text)))
    [p] = of(collect(agent(script), ctx), Proposal)
    assert p.source == CANDIDATE and p.meta["via"] == "fenced"
    assert p.description == "Read each short row once."


def test_malformed_answer_gets_one_feedback_round(ctx):
    script = Script(sse(anthropic_events(text="I would use a bigger block.")),
                    sse(anthropic_events(tool_args=tool_args())))
    events = collect(agent(script), ctx)
    [warn] = [n for n in of(events, Notice) if n.level == "warning"]
    assert "no fenced code block" in warn.message and "asking again" in warn.message
    assert len(of(events, Proposal)) == 1
    msgs = script.bodies[1]["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
    assert msgs[1]["content"][0]["text"] == "I would use a bigger block."
    assert "submit_kernel" in msgs[2]["content"][0]["text"] and "`softmax`" in msgs[2]["content"][0]["text"]
    # Both requests cost money: two usage reports.
    assert len(of(events, UsageReport)) == 2


def test_malformed_twice_gives_up_without_crashing(ctx):
    bad_tool = json.dumps({"source": "def softmax(x):\n    return x +\n", "rationale": "oops"})
    script = Script(sse(anthropic_events(text="```python\nprint(1)\n```\n```python\nprint(2)\n```")),
                    sse(anthropic_events(tool_args=bad_tool)))
    events = collect(agent(script), ctx)
    assert not of(events, Proposal) and not of(events, Exhausted)
    msgs = [n.message for n in of(events, Notice)]
    assert "2 python code blocks" in msgs[0]
    assert "does not parse: line 2" in msgs[1] and "giving up" in msgs[1]
    assert len(script.requests) == 2


def test_truncated_tool_json_says_the_token_limit_was_hit(ctx):
    args = tool_args()[:200]
    events = collect(agent(Script(sse(anthropic_events(tool_args=args)),
                                  sse(anthropic_events(tool_args=tool_args()))), max_tokens=4096,
                           thinking="off"), ctx)
    assert "not valid JSON" in of(events, Notice)[0].message
    assert len(of(events, Proposal)) == 1


def test_429_then_success_honours_retry_after(ctx):
    script = Script(error(429, "rate_limit_error", "slow down", {"retry-after": "0.02"}),
                    sse(anthropic_events(tool_args=tool_args())))
    events = collect(agent(script), ctx)
    [n] = [n for n in of(events, Notice) if "retry" in n.message]
    assert "HTTP 429" in n.message and "retry 1/3 in 0.0s (server's retry-after)" in n.message
    assert len(of(events, Proposal)) == 1 and len(script.requests) == 2


def test_529_overloaded_and_timeout_and_dropped_stream_are_retried(ctx):
    half = sse(anthropic_events(tool_args=tool_args()))[:300]
    script = Script(error(529, "overloaded_error", "Overloaded"), timeout,
                    lambda r: ok_stream(DropAfter(half)),
                    sse(anthropic_events(tool_args=tool_args(), end=False)),  # no message_stop
                    sse(anthropic_events(tool_args=tool_args())))
    events = collect(agent(script, retry=type(FAST)(max_retries=5, base_s=0.001, cap_s=0.01)), ctx)
    retries = [n.message for n in of(events, Notice) if "retry" in n.message]
    assert len(retries) == 4
    assert "HTTP 529" in retries[0]
    assert "timed out" in retries[1]
    assert "connection failed or dropped" in retries[2]
    assert "stream dropped" in retries[3]
    assert len(of(events, Proposal)) == 1


def test_error_event_inside_the_stream_is_retried(ctx):
    overloaded = sse([("message_start", anthropic_events()[0][1]),
                      ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})])
    script = Script(overloaded, sse(anthropic_events(tool_args=tool_args())))
    events = collect(agent(script), ctx)
    assert "overloaded_error" in of(events, Notice)[0].message
    assert len(of(events, Proposal)) == 1


def test_retries_run_out_without_stopping_the_session(ctx):
    script = Script(*[error(500, "api_error", "boom") for _ in range(4)])
    events = collect(agent(script), ctx)
    assert not of(events, Proposal) and not of(events, Exhausted)
    assert "gave up after 3 retries" in of(events, Notice)[-1].message


def test_401_is_fatal_with_one_clear_message(ctx):
    script = Script(error(401, "authentication_error", "invalid x-api-key"))
    events = collect(agent(script), ctx)
    [ex] = of(events, Exhausted)
    assert ex.fatal and "ANTHROPIC_API_KEY" in ex.reason and "401" in ex.reason
    assert len(script.requests) == 1 and not of(events, Notice)


def test_unknown_model_is_fatal(ctx):
    script = Script(error(404, "not_found_error", "model: claude-nope"))
    [ex] = of(collect(agent(script, model="claude-nope"), ctx), Exhausted)
    assert ex.fatal and "'claude-nope' not found" in ex.reason


def test_cancel_closes_the_stream_and_counts_what_was_spent(ctx, tmp_path):
    body = Slow(sse(anthropic_events(thinking=["a", "b", "c", "d", "e", "f"], tool_args=tool_args())))
    script = Script(lambda r: ok_stream(body))
    budget = Budget()

    def on_event(e):
        if isinstance(e, ReasoningChunk):
            ctx.cancel.set()

    events = collect(agent(script, budget=budget, transcript_dir=tmp_path), ctx, on_event)
    assert not of(events, Proposal)
    assert "cancelled" in of(events, Notice)[-1].message
    assert body.closed.is_set() and body.sent < len(body.parts)
    [u] = of(events, UsageReport)
    assert u.input_tokens == 1000 and budget.input_tokens == 1000
    assert "Cancelled" in next(tmp_path.glob("*.md")).read_text()


def test_cost_from_the_price_table_and_budget_stops_proposing(ctx):
    script = Script(sse(anthropic_events(tool_args=tool_args(), input_tokens=1000, cache_read=5000,
                                         cache_write=2000, output_tokens=800, thinking_tokens=300)))
    budget = Budget(limit_usd=0.03)
    events = collect(agent(script, budget=budget), ctx)
    [u] = of(events, UsageReport)
    # claude-opus-5-5: $4 in, $5 cache write, $0.20 cache read, $20 out per million tokens.
    assert u.cost_usd == pytest.approx((1000 * 4 + 2000 * 5 + 5000 * 0.2 + 800 * 20) / 1e6)
    assert (u.input_tokens, u.cached_tokens, u.output_tokens, u.reasoning_tokens) == (8000, 5000, 800, 300)
    assert budget.spent_usd == pytest.approx(0.031) and budget.exhausted
    # Over budget: the next proposal sends nothing and says why, without calling it fatal.
    again = collect(agent(Script(), budget=budget), ctx)
    [ex] = of(again, Exhausted)
    assert not ex.fatal and "budget reached" in ex.reason and "$0.0310 of $0.03" in ex.reason


def test_manual_thinking_for_older_models(ctx):
    assert default_thinking("claude-haiku-4-5-20251001") == "enabled"
    assert default_thinking("claude-opus-4-6") == "adaptive"
    assert default_thinking("claude-sonnet-5-5") == "adaptive"
    script = Script(sse(anthropic_events(tool_args=tool_args())))
    collect(agent(script, model="claude-haiku-4-5", thinking_budget=2048, effort="high"), ctx)
    assert script.bodies[0]["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert script.bodies[0]["output_config"] == {"effort": "high"}


def test_real_prompt_gets_a_breakpoint_after_packs_and_task(task):
    """With harness.prompt's real layout, packs + task are cached apart from incumbent and history."""
    from harness.agents.base import ProposalContext
    from harness.authoring.packs import Selection, discover
    from harness.prompt import build_prompt

    packs = Selection(["h200"]).resolve(discover())
    p = build_prompt(task, task.baseline_path.read_text(), packs, [], ["pipeline the loads"], None)
    ctx = ProposalContext(task, 1, task.baseline_path.read_text(), "c0ffee", system=p.system, prompt=p.user)
    script = Script(sse(anthropic_events(tool_args=tool_args())))
    collect(agent(script), ctx)
    stable, rest = script.bodies[0]["messages"][0]["content"]
    assert stable["cache_control"] == {"type": "ephemeral"} and "cache_control" not in rest
    assert "h200" in stable["text"].lower() and task.summary in stable["text"]
    assert rest["text"].startswith("# Standing directions") and "pipeline the loads" in rest["text"]
    assert stable["text"] + rest["text"] == p.user


def test_a_model_refusing_adaptive_thinking_gets_budget_tokens(ctx):
    script = Script(error(400, "invalid_request_error", "thinking.type: adaptive is not supported for this model"),
                    sse(anthropic_events(tool_args=tool_args())))
    events = collect(agent(script, model="claude-future-1"), ctx)
    assert "retrying with budget_tokens" in of(events, Notice)[0].message
    assert script.bodies[1]["thinking"] == {"type": "enabled", "budget_tokens": 16000, "display": "summarized"}
    assert len(of(events, Proposal)) == 1


def test_other_bad_requests_are_fatal(ctx):
    script = Script(error(400, "invalid_request_error", "prompt is too long: 250000 tokens > 200000 maximum"))
    [ex] = of(collect(agent(script), ctx), Exhausted)
    assert ex.fatal and "prompt is too long" in ex.reason and len(script.requests) == 1


def test_proposal_meta_sums_the_usage_of_its_requests_and_budget_warns_at_80_percent(ctx):
    script = Script(sse(anthropic_events(text="no code", input_tokens=1000, output_tokens=100)),
                    sse(anthropic_events(tool_args=tool_args(), input_tokens=1500, output_tokens=200)))
    budget = Budget(limit_usd=0.015)
    events = collect(agent(script, budget=budget), ctx)
    [p] = of(events, Proposal)
    assert p.meta["usage"]["input_tokens"] == 2500 and p.meta["usage"]["output_tokens"] == 300
    assert p.meta["usage"]["cost_usd"] == pytest.approx((2500 * 4 + 300 * 20) / 1e6)
    warns = [n.message for n in of(events, Notice) if "80% of the budget" in n.message]
    assert len(warns) == 1 and "$0.0160 of $0.015" in warns[0]

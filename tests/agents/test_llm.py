"""Shared LLM-agent parts: extraction, prices, retry timing, budget, config and keys, the registry."""
from __future__ import annotations

import email.utils
import json
import random
import threading
import time

import pytest

from harness.agents.base import UsageReport
from harness.agents.budget import Budget, Price, PriceTable
from harness.agents.config import AgentConfigError, provider_config, resolve_key
from harness.agents.extract import ExtractionError, ToolCall, extract_candidate
from harness.agents.retry import RetryPolicy, classify, parse_retry_after
from harness.agents.transcript import Transcript
from harness.agents.registry import AgentSpecError, make_agent, parse_spec

GOOD = "import triton\n\ndef softmax(x):\n    return x\n"


def call(args) -> list[ToolCall]:
    return [ToolCall("submit_kernel", args if isinstance(args, str) else json.dumps(args))]


# -- extraction -------------------------------------------------------------------------------

def test_tool_call_wins_over_text_and_unwraps_a_fenced_source():
    c = extract_candidate("```python\nprint(1)\n```", call({"source": f"```python\n{GOOD}```", "rationale": "r"}),
                          "softmax")
    assert c.source == GOOD and c.via == "tool" and c.description == "r"


@pytest.mark.parametrize("text,calls,problem", [
    ("no code here", [], "no fenced code block"),
    ("```cpp\nint x;\n```", [], "no python block (found: cpp)"),
    (f"```python\n{GOOD}```\n```python\n{GOOD}```", [], "2 python code blocks"),
    ("```python\ndef softmax(x:\n```", [], "does not parse: line 1"),
    ("```python\ndef other(x):\n    pass\n```", [], "no top-level `softmax`"),
    ("", call('{"source": "def softmax('), "not valid JSON"),
    ("", call({"rationale": "forgot"}), "without a non-empty `source`"),
    ("", call({"source": GOOD}) * 2, "2 times"),
    ("", [ToolCall("run_shell", "{}")], "unknown tool 'run_shell'"),
])
def test_unusable_answers_name_the_problem(text, calls, problem):
    with pytest.raises(ExtractionError, match=problem.replace("(", r"\(").replace(")", r"\)")):
        extract_candidate(text, calls, "softmax")


def test_untagged_single_block_and_entry_by_assignment():
    c = extract_candidate("Alias the kernel.\n```\nimport torch\nsoftmax = torch.softmax\n```", [], "softmax")
    assert c.via == "fenced" and c.description == "Alias the kernel."


# -- prices -----------------------------------------------------------------------------------

def test_price_cost_and_long_prompt_tier():
    p = Price(input=0.1, output=0.5, cache_read=0.01, cache_write=0.125, long_threshold=100_000,
              long=Price(0.5, 2.5, 0.05, 0.625))
    assert p.cost(10_000, 4_000, 1_000, 2_000) == pytest.approx((5_000 * 0.1 + 4_000 * 0.01 + 1_000 * 0.125
                                                                 + 2_000 * 0.5) / 1e6)
    assert p.cost(200_000, 0, 0, 1_000) == pytest.approx((200_000 * 0.5 + 1_000 * 2.5) / 1e6)
    # No cache prices: cached tokens cost the input rate.
    assert Price(2.0, 4.0).cost(1000, 500, 0, 0) == pytest.approx(1000 * 2.0 / 1e6)


def test_builtin_table_loads_and_dated_ids_fall_back():
    t = PriceTable.load()
    assert t.lookup("anthropic", "claude-haiku-5-5").long_threshold == 100_000
    assert t.lookup("anthropic", "claude-opus-4-5-20251101") == t.lookup("anthropic", "claude-opus-4-5")
    assert t.lookup("openai", "gpt-5.4-mini").input == 0.75
    assert t.lookup("openai", "gpt-5.4-mini-2026-03-17") is not None
    assert t.lookup("openai", "gpt-5.4-mega") is None  # no guessing by prefix


def test_bad_user_price_file_names_file_and_field(tmp_path):
    bad = tmp_path / "prices.toml"
    bad.write_text('[openai."gpt-x"]\ninput = "cheap"\noutput = 1\n')
    with pytest.raises(AgentConfigError, match=r"prices.toml: openai.'gpt-x'.input: must be a number"):
        PriceTable.load([bad])
    bad.write_text("[openai\n")
    with pytest.raises(AgentConfigError, match="prices.toml: bad TOML"):
        PriceTable.load([bad])


# -- retries ----------------------------------------------------------------------------------

def test_retry_after_forms():
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 < parse_retry_after({"retry-after": when}) <= 30
    assert parse_retry_after({"retry-after": "soon"}) is None and parse_retry_after({}) is None


def test_backoff_grows_with_jitter_and_caps():
    policy, rng = RetryPolicy(base_s=1.0, cap_s=8.0, jitter=0.5), random.Random(1)
    delays = [policy.delay(i, None, rng) for i in range(6)]
    for i, d in enumerate(delays):
        base = min(8.0, 2 ** i)
        assert base <= d <= base * 1.5
    assert policy.delay(0, 42.0, rng) == 42.0  # the server's word wins
    assert policy.delay(0, 10_000.0, rng) == policy.max_retry_after_s


def test_unknown_exception_is_fatal_not_retried():
    f = classify(RuntimeError("bug"))
    assert f.kind == "fatal" and "RuntimeError" in f.message


# -- budget -----------------------------------------------------------------------------------

def test_budget_is_thread_safe_and_knows_when_it_is_spent():
    b = Budget(limit_usd=1.0)

    def spend():
        for _ in range(1000):
            b.add(UsageReport(input_tokens=10, output_tokens=1, cached_tokens=5, reasoning_tokens=1, cost_usd=0.0001))

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert b.requests == 8000 and b.input_tokens == 80_000
    assert b.spent_usd == pytest.approx(0.8) and not b.exhausted and b.remaining_usd == pytest.approx(0.2)
    b.add(UsageReport(cost_usd=0.25))
    assert b.exhausted and b.to_dict()["spent_usd"] == pytest.approx(1.05)
    with pytest.raises(ValueError):
        Budget(-1)


# -- config and keys --------------------------------------------------------------------------

def test_key_from_env_then_config_file(tmp_path, monkeypatch):
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "config.toml").write_text('[anthropic]\napi_key = "sk-ant-from-file-0001"\nmodel = "claude-sonnet-5-5"\n')
    section = provider_config("anthropic")
    assert resolve_key("anthropic", ("ANTHROPIC_API_KEY",), section) == "sk-ant-from-file-0001"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-0002")
    assert resolve_key("anthropic", ("ANTHROPIC_API_KEY",), section) == "sk-ant-from-env-0002"
    agent = make_agent("anthropic")
    assert agent.model == "claude-sonnet-5-5"  # default model from the config file


def test_missing_key_says_where_to_put_it():
    with pytest.raises(AgentConfigError, match=r"OPENAI_API_KEY, or api_key in \[openai\] of .*config.toml"):
        make_agent("openai:gpt-5.5")


def test_bad_config_file_is_named(tmp_path):
    cfg = tmp_path / "config"
    cfg.mkdir()
    (cfg / "config.toml").write_text("[anthropic\n")
    with pytest.raises(AgentConfigError, match="config.toml: bad TOML"):
        make_agent("anthropic:claude-opus-5-5")


def test_transcript_redacts_keys(tmp_path):
    t = Transcript(tmp_path, "openai", "gpt-5.5", 1, secrets=("sk-secret-abcdef123",))
    t.add("Prompt", "env said sk-secret-abcdef123 somewhere")
    text = t.write().read_text()
    assert "sk-secret" not in text and "[redacted]" in text


# -- registry ---------------------------------------------------------------------------------

def test_specs():
    assert parse_spec("openai-compat:http://h:8000#org/model:tag") == ("openai-compat", "http://h:8000#org/model:tag")
    assert parse_spec("anthropic:claude-opus-5-5") == ("anthropic", "claude-opus-5-5")
    for bad, msg in [("gemini:x", "unknown agent"), ("script", "needs script:DIR"),
                     ("openai-compat", "needs openai-compat:URL"), ("tuner:x", "takes no argument")]:
        with pytest.raises(AgentSpecError, match=msg):
            make_agent(bad)


def test_registry_builds_each_kind(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-000000000")
    assert make_agent("tuner").name == "tuner"
    (tmp_path / "01_a.py").write_text(GOOD)
    assert make_agent(f"script:{tmp_path}").name == "script"
    with pytest.raises(AgentSpecError, match="needs a folder"):
        make_agent(f"script:{tmp_path / 'nope'}")
    a = make_agent("openai-compat:http://h:8000#org/model:tag", transcript_dir=tmp_path)
    assert (a.name, a.model, a.base_url) == ("openai-compat", "org/model:tag", "http://h:8000/v1")
    assert make_agent("openai:gpt-5.4").model == "gpt-5.4"
    with pytest.raises(AgentSpecError, match="unexpected keyword"):
        make_agent("openai:gpt-5.4", colour="blue")


def test_budget_usd_option_makes_the_agents_budget(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-00000000")
    a = make_agent("anthropic:claude-opus-5-5", budget_usd=2.5, transcript_dir=None)
    assert a.budget.limit_usd == 2.5 and not a.budget.exhausted
    assert make_agent("tuner", budget_usd=2.5).name == "tuner"  # LLM options don't bother the tuner


def test_without_a_prompt_builder_the_agent_writes_its_own_prompt(ctx, tmp_path):
    """A loop with no prompt builder still sends the task, entry and incumbent."""
    from agent_streams import FAST, Script, chat_events, collect, of, sse, tool_args
    from harness.agents.base import Proposal
    from harness.agents.openai import OpenAICompatAgent

    ctx.prompt, ctx.system = "", ""
    ctx.ideas = ["pipeline the loads"]
    script = Script(sse(chat_events(tool_args_json=tool_args())))
    agent = OpenAICompatAgent("http://h:1", "", retry=FAST, transcript_dir=tmp_path,
                              http_client=script.client())
    agent.model = "m"
    assert len(of(collect(agent, ctx), Proposal)) == 1
    system, user = (m["content"] for m in script.bodies[0]["messages"])
    assert "triton kernels" in system and "`softmax`" in system
    assert "Row-wise softmax" in user and "pipeline the loads" in user and "_softmax_kernel" in user
    assert "· m · iteration 3" in next(tmp_path.glob("*.md")).read_text()


def test_agents_command_shows_key_status_never_keys(tmp_path, monkeypatch, capsys):
    from warpsmith.cli import main

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-visible-never-0001")
    assert main(["agents", "--prices"]) == 0
    out = capsys.readouterr().out
    assert "set (ANTHROPIC_API_KEY)" in out and "sk-ant-visible" not in out
    assert "openai:MODEL" in out and "missing" in out and "claude-opus-5-5" in out
    assert main(["agents", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["keys"]["openai"] == "missing" and data["price_files"][0].endswith("prices.toml")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "prices.toml").write_text("[openai\n")
    assert main(["agents"]) == 2
    assert "prices.toml: bad TOML" in capsys.readouterr().err

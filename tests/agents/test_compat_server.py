"""openai-compat agent against a real HTTP server on 127.0.0.1 (tests/agents/fake_server.py)."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from agent_streams import CANDIDATE, FAST, collect, of, reasoning
from fake_server import FakeServer
from harness.agents.base import Notice, Proposal, ReasoningChunk, UsageReport
from harness.agents.budget import Budget
from harness.agents.registry import make_agent


def test_registry_agent_streams_reasoning_and_a_real_candidate(ctx, tmp_path):
    with FakeServer(["tool"], lifetime_s=60) as srv:
        agent = make_agent(f"openai-compat:{srv.url}", retry=FAST, transcript_dir=tmp_path, budget=Budget(1.0))
        events = collect(agent, ctx)
    assert agent.model == "fake-coder"  # asked /v1/models
    assert "reads every row twice" in reasoning(events)
    [p] = of(events, Proposal)
    assert p.source == CANDIDATE and p.meta["via"] == "tool"
    assert of(events, UsageReport)[0].input_tokens == 2100
    assert srv.requests[0]["messages"][1]["content"] == ctx.prompt


def test_fenced_after_429_and_a_server_without_tools(ctx):
    with FakeServer(["429", "notools"], lifetime_s=60) as srv:
        events = collect(make_agent(f"openai-compat:{srv.url}#fake-coder", retry=FAST), ctx)
    msgs = [n.message for n in of(events, Notice)]
    assert "HTTP 429" in msgs[0] and "without tools" in msgs[1]
    [p] = of(events, Proposal)
    assert p.meta["via"] == "fenced" and p.source == CANDIDATE
    assert len(srv.requests) == 3 and "tools" not in srv.requests[2]


def test_garbage_twice_gives_no_proposal(ctx):
    with FakeServer(["garbage"], lifetime_s=60) as srv:
        events = collect(make_agent(f"openai-compat:{srv.url}#fake-coder", retry=FAST), ctx)
    assert not of(events, Proposal) and "giving up" in of(events, Notice)[-1].message
    assert len(srv.requests) == 2


def test_cancel_unblocks_a_stalled_stream(ctx):
    """The server sends one delta and then nothing for 30 s: cancel must not wait for the next chunk."""
    with FakeServer(["stall"], lifetime_s=60, stall_s=30) as srv:
        agent = make_agent(f"openai-compat:{srv.url}#fake-coder", retry=FAST)
        started = []

        def on_event(e):
            if isinstance(e, ReasoningChunk) and not started:
                started.append(time.monotonic())
                threading.Timer(0.3, ctx.cancel.set).start()

        events = collect(agent, ctx, on_event)
        waited = time.monotonic() - started[0]
    assert not of(events, Proposal)
    assert "cancelled" in of(events, Notice)[-1].message
    assert waited < 5, f"cancel took {waited:.1f}s"


def test_server_runs_as_a_script_with_a_bounded_lifetime(ctx):
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fake_server.py")), "--modes", "fenced",
                             "--lifetime", "20"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        events = collect(make_agent(f"openai-compat:{url}", retry=FAST), ctx)
        assert of(events, Proposal)[0].meta["via"] == "fenced"
    finally:
        proc.terminate()
        proc.wait(10)


def test_parallel_proposals_share_one_agent_and_budget(task, tmp_path):
    """--proposals N runs N propose() in threads on one agent: each gets its own candidate and
    transcript, and the shared budget counts every request."""
    from harness.agents.base import ProposalContext

    budget = Budget()
    with FakeServer(["tool"], lifetime_s=60, chunk_pause_s=0.01) as srv:
        agent = make_agent(f"openai-compat:{srv.url}", retry=FAST, transcript_dir=tmp_path, budget=budget)
        results: dict[int, list] = {}

        def one(i: int) -> None:
            c = ProposalContext(task, 10 + i, task.baseline_path.read_text(), "c0ffee", system="S", prompt=f"P{i}")
            results[i] = collect(agent, c)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sorted(results) == [0, 1, 2, 3]
    assert all(len(of(r, Proposal)) == 1 for r in results.values())
    assert budget.requests == 4 and budget.input_tokens == 4 * 2100
    assert len(list(tmp_path.glob("iter-*.md"))) == 4
    assert sorted(r["messages"][1]["content"] for r in srv.requests) == ["P0", "P1", "P2", "P3"]

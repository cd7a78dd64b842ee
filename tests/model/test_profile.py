"""Bottleneck classification on synthetic figures, ncu CSV parsing, and the CPU expectation path."""
from __future__ import annotations

import json

import pytest

from harness.profiling import profile as pf
from warpsmith.cli import main

H200ISH = pf.Ceilings(copy_gbs=4000.0, matmul_tflops=700.0, launch_us=4.0)


def test_memory_bound_near_copy_bandwidth():
    # 2 GB moved in 600 us = 3.33 TB/s = 83% of 4 TB/s; 1 flop per 4 bytes
    r = pf.classify(2e9, 5e8, 600.0, H200ISH)
    assert r["bound"] == "memory" and r["expected_bound"] == "memory"
    assert r["memory_pct"] == pytest.approx(83.33, rel=1e-3) and r["utilization"] == "near ceiling"
    assert "memory-bound at 83% of the 4000 GB/s copy bandwidth (measured)" in r["hint"]


def test_compute_bound_matmul_like():
    # 8192^3 matmul: 1.1e12 flops, 400 MB; at 2 ms that is 550 TFLOP/s = 79% of 700
    flops, nbytes = 2 * 8192 ** 3, 3 * 8192 * 8192 * 2
    r = pf.classify(nbytes, flops, 2000.0, H200ISH)
    assert r["bound"] == "compute" and r["expected_bound"] == "compute"
    assert r["compute_pct"] == pytest.approx(100 * flops / 700e12 / 2e-3, rel=1e-6)
    assert r["arithmetic_intensity"] > r["ridge"] == pytest.approx(175.0)


def test_launch_bound_from_gaps_and_launch_count():
    # 5 launches of a tiny kernel: 3 us of GPU work in a 20 us call
    r = pf.classify(1e4, 1e4, 20.0, H200ISH, launches=5, kernel_us=3.0)
    assert r["bound"] == "launch" and r["launch_pct"] == pytest.approx(100.0)
    assert "CUDA graph" in r["hint"]
    # the same call with one launch and little gap is not launch-bound by launch count alone
    r = pf.classify(4e7, 1e7, 20.0, H200ISH, launches=1, kernel_us=18.0)
    assert r["bound"] == "memory" and r["launch_pct"] == pytest.approx(20.0)


def test_far_from_both_ceilings_says_latency():
    r = pf.classify(1e8, 1e8, 1000.0, H200ISH, launches=1, kernel_us=999.0)
    assert r["bound"] == "memory" and r["memory_pct"] == pytest.approx(2.5)
    assert r["utilization"].startswith("far from both") and "parallelism" in r["hint"]


def test_unmeasured_gives_roofline_expectation_only():
    r = pf.classify(1e6, 1.25e6, None, H200ISH)
    assert r["bound"] == "unknown" and r["memory_pct"] is None
    assert r["hint"] == "not measured; arithmetic intensity 1.25 flop/B vs ridge 175: expect memory-bound"


def test_parse_ncu_csv_skips_noise():
    text = "\n".join([
        "==PROF== Connected to process 1234",
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Section Name","Metric Name","Metric Unit","Metric Value"',
        '"0","1234","python","h","_softmax_kernel","1","7","","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","81.52"',
        '"0","1234","python","h","_softmax_kernel","1","7","","gpu__time_duration.sum","usecond","1,204.10"',
        '"0","1234","python","h","_softmax_kernel","1","7","","launch__registers_per_thread","register/thread","32"',
    ])
    m = pf.parse_ncu_csv(text)
    assert m["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(81.52)
    assert m["gpu__time_duration.sum"] == pytest.approx(1204.1)
    assert m["kernel"] == "_softmax_kernel"


def test_profile_command_on_cpu_is_expectation_with_pack_ceilings(capsys):
    assert main(["profile", "softmax", "--json", "--pack", "h200"]) == 0
    p = json.loads(capsys.readouterr().out)
    assert p["timing_available"] is False and p["ceilings"]["source"] == "pack:h200"
    assert "hardware pack h200" in p["expectation_from"]
    assert [s["name"] for s in p["shapes"]] == ["4k x 4k", "many short rows", "vocab 32k", "long rows 128k"]
    assert all(s["expected_bound"] == "memory" and s["us"] is None for s in p["shapes"])
    assert pf.prompt_section(p).startswith("Bottleneck profile of the incumbent (not measured: no GPU):")


def test_profile_on_cpu_assumes_no_gpu_without_a_pack(capsys):
    """No GPU and no --pack: nothing measured, and no GPU's figures quoted (it once showed H200's)."""
    assert main(["profile", "softmax"]) == 0
    out = capsys.readouterr().out
    assert "nothing was measured (no GPU)" in out and "no hardware pack given (--pack ID)" in out
    assert "ceilings" not in out and "4800" not in out and "H200" not in out and "h200" not in out
    assert "arithmetic intensity 1.25 flop/B" in out


def test_profile_pack_without_figures_or_unknown_says_so(capsys):
    assert main(["profile", "softmax", "--pack", "rtx4090"]) == 0
    assert "hardware pack rtx4090 gives no bf16_dense_tflops, so no roofline expectation" in capsys.readouterr().out
    assert main(["profile", "softmax", "--pack", "nope"]) == 2
    assert "--pack: no pack 'nope'" in capsys.readouterr().err
    assert main(["profile", "softmax", "--pack", "dsl-triton"]) == 2
    assert "a rules pack, not a hardware pack" in capsys.readouterr().err


def test_profile_command_names_unknown_shape(capsys):
    assert main(["profile", "softmax", "--shapes", "nope"]) == 2
    assert "task.toml: no shape(s) ['nope']" in capsys.readouterr().err


@pytest.mark.gpu
def test_profile_on_gpu_measures_ceilings_and_launches():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    from harness.authoring.tasks import load_task

    p = pf.profile_task(load_task("softmax"), shapes=["4k x 4k"], use_ncu=False)
    s = p["shapes"][0]
    assert p["ceilings"]["copy_gbs"] > 500 and s["launches"] >= 1 and s["bound"] in ("memory", "compute", "launch")


def test_cached_profile_runs_in_a_child_once(tmp_path):
    from harness.authoring.tasks import load_task

    task = load_task("softmax")
    p = pf.cached_profile(task, task.baseline_path, tmp_path)
    assert "error" not in p, p
    assert p["task"] == "softmax" and len(p["shapes"]) == 4
    cached = list(tmp_path.glob("profile-softmax-*.json"))
    assert len(cached) == 1
    cached[0].write_text(cached[0].read_text().replace('"softmax"', '"from-cache"', 1))
    assert pf.cached_profile(task, task.baseline_path, tmp_path)["task"] == "from-cache"


def test_on_a_gpu_the_incumbents_profile_goes_to_the_prompt_and_once_to_the_bench(tmp_path, monkeypatch):
    """The wiring, with the GPU-only parts replaced by what they return on the H200 (the real
    profiler runs in test_profile_on_gpu_measures_ceilings_and_launches)."""
    import harness.evaluate.backends as backends
    import harness.profiling.profile
    import harness.wiring as w
    from harness import events as ev
    from harness.agents.base import Exhausted, Proposal
    from harness.loop import AutoDecider
    from harness.authoring.tasks import load_task

    task = load_task("softmax")
    canned = {"task": "softmax", "timing_available": True,
              "shapes": [{"name": "4k x 4k", "us": 31.6, "bound": "memory", "hint": "memory-bound at 50%"}]}
    calls = []
    monkeypatch.setattr(harness.profiling.profile, "cached_profile", lambda *a, **k: calls.append(a) or canned)
    monkeypatch.setattr(w, "device_label", lambda: "NVIDIA H200")
    prompts = []

    class ReadsPrompt:  # an LLM agent's shape: proposes the incumbent again, reads its prompt
        name, model = "reader", ""

        def propose(self, ctx):
            prompts.append(ctx.prompt)
            if ctx.iteration > 2:
                yield Exhausted("done")
                return
            yield Proposal(ctx.incumbent_source + f"\n# try {ctx.iteration}\n", f"try {ctx.iteration}")

    monkeypatch.setattr(w, "make_agent", lambda *a, **k: ReadsPrompt())
    canned_verdict = {"accepted": True, "stage": "done", "reasons": [], "shapes": [], "timing_available": False,
                      "recommendation": {"action": "revert", "reason": "canned", "can_keep": True}}
    monkeypatch.setattr(w, "make_evaluator", lambda *a, **k: backends.LocalEvaluator(lambda job: canned_verdict))
    monkeypatch.chdir(tmp_path)
    cfg = w.RunConfig(agent="reader", iterations=3, auto=True)
    events = []
    loop = w.build_loop(w.start_session(task, cfg), task, cfg, AutoDecider(), events.append)
    loop.run()
    assert all("Bottleneck profile of the incumbent:\n- 4k x 4k: memory-bound at 50%" in p for p in prompts)
    shown = [e for e in events if isinstance(e, ev.ProfileReady)]
    assert len(shown) == 1 and shown[0].profile == canned  # the incumbent never changed: shown once


def test_headless_prints_the_profile_hints():
    import io

    from harness import events as ev
    from harness.headless import Printer

    out = io.StringIO()
    Printer(out)(ev.ProfileReady(2, "abc", {"shapes": [{"name": "4k x 4k", "hint": "memory-bound at 50%"}]}))
    assert out.getvalue() == "  [2] incumbent profile:\n    4k x 4k: memory-bound at 50%\n"


@pytest.mark.parametrize("n, words", [(1, "after 1 iteration"), (2, "after 2 iterations")])
def test_headless_session_end_counts_iterations_in_good_english(n, words, tmp_path):
    from harness import events as ev
    from harness.sessions.summary import summary_lines
    from tui.testing import make_session, softmax_task

    lines = summary_lines(make_session(tmp_path, softmax_task()), ev.SessionEnded("done", "abcdef0123456", n))
    assert lines[0].endswith(words)

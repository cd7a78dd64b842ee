"""The step profile (harness/model/step_profile.py): where one step of the task's workload spends its time.

The arithmetic is tested on fixed figures; the cost pass runs the real softmax workload on the CPU
(Triton's interpreter), where nothing is timed and the profile must say so."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.profiling.profile import Ceilings, pack_ceilings
from harness.model.step_profile import StepProfile, build_rows, format_step_profile, profile_step, prompt_section
from harness.authoring.tasks import load_task

H200ish = Ceilings(copy_gbs=4000.0, matmul_tflops=800.0, launch_us=4.0, source="test")


def test_measured_rows_rank_by_gpu_time_with_shares_roofline_and_amdahl_gain():
    costs = {"aten::mm": {"kind": "op", "calls": 3, "bytes": 40e6, "flops": 2e9},
             "softmax (task kernel)": {"kind": "task", "calls": 1, "bytes": 20e6, "flops": 0.0},
             "aten::view": {"kind": "op", "calls": 4, "bytes": 0.0, "flops": 0.0}}  # launched nothing
    times = {"aten::mm": {"kind": "op", "device_us": 30.0, "launches": 3, "kernels": ["sm90_gemm"]},
             "softmax (task kernel)": {"kind": "task", "device_us": 50.0, "launches": 1, "kernels": ["_softmax"]}}
    rows = build_rows(costs, times, step_us=100.0, ceilings=H200ish)
    assert [r.name for r in rows] == ["softmax (task kernel)", "aten::mm"]  # the view launched no kernel
    sm, mm = rows
    assert sm.share == pytest.approx(0.5) and mm.share == pytest.approx(0.3)
    assert sm.roofline_us == pytest.approx(5.0)  # 20 MB at 4000 GB/s
    assert sm.roofline_pct == pytest.approx(0.1)
    # Amdahl: the step loses 50 - 5 us of its 100 if softmax ran at its roofline.
    assert sm.gain == pytest.approx(100 / 55)
    assert mm.roofline_us == pytest.approx(10.0) and mm.bound == "memory"
    assert "50% of the step" in sm.idea_context(StepProfile("softmax", "decode step", "GPU", True, None, rows))


def test_unmeasured_rows_rank_by_roofline_and_say_their_shares_are_expected():
    costs = {"a": {"kind": "op", "calls": 1, "bytes": 1e6, "flops": 0.0},
             "b": {"kind": "op", "calls": 1, "bytes": 3e6, "flops": 0.0}}
    rows = build_rows(costs, None, None, H200ish)
    assert [r.name for r in rows] == ["b", "a"]
    assert [r.share for r in rows] == [pytest.approx(0.75), pytest.approx(0.25)]
    assert all(r.device_us is None and r.gain is None for r in rows)


@pytest.fixture(scope="module")
def cpu_profile():
    from harness.authoring.packs import discover

    return profile_step(load_task("softmax", check_null=False), pack_ceilings=pack_ceilings(discover().get("h200"))[0])


def test_cpu_profile_of_the_softmax_workload_counts_ops_and_measures_nothing(cpu_profile):
    p = cpu_profile
    assert not p.measured and p.step_us is None
    assert "nothing was measured" in p.note and "pack:h200" in p.note
    names = [r.name for r in p.rows]
    assert "softmax (task kernel)" in names and "rmsnorm" not in " ".join(names)  # the default rmsnorm is torch ops
    assert {"aten::mm", "aten::bmm"} <= set(names)
    mm = next(r for r in p.rows if r.name == "aten::mm")
    assert mm.flops and mm.bytes and mm.calls == 3  # wq, wo, w_up
    # Each op's first call, as the step made it: what `n` on the profile screen makes a task of.
    assert mm.example["op"] == "aten.mm.default" and [a["dtype"] for a in mm.example["args"]] == ["bfloat16"] * 2
    assert next(r for r in p.rows if r.kind == "task").example is None  # the task's own kernel: not an op
    assert sum(r.share for r in p.rows) == pytest.approx(1.0)
    again = StepProfile.from_json(json.loads(json.dumps(p.to_json())))
    assert again.rows[0].name == p.rows[0].name and again.note == p.note
    text = "\n".join(format_step_profile(p))
    assert "softmax (task kernel)" in text and "roof us" in text
    assert "softmax's kernel alone, per shape (expected)" in text and "no hardware counters" in text
    assert [s["name"] for s in p.kernel_shapes] == [s.name for s in load_task("softmax").shapes]
    assert "expected from the hardware pack, not measured" in prompt_section(p)


def test_without_a_pack_there_is_no_roofline_and_the_profile_says_how_to_get_one():
    p = profile_step(load_task("softmax", check_null=False))
    assert p.ceilings is None and all(r.roofline_us is None for r in p.rows)
    assert "pick one" in p.note


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "warpsmith", "profile", *args], capture_output=True, text=True,
                          timeout=300)


def test_cli_prints_the_step_table_and_refuses_bad_input_in_one_line():
    r = _cli("softmax", "--e2e", "--pack", "h200")
    assert r.returncode == 0, r.stderr
    assert "softmax (task kernel)" in r.stdout and "nothing was measured" in r.stdout
    bad = _cli("softmax", "--e2e", "--pack", "nosuchpack")
    assert bad.returncode == 2 and "nosuchpack" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.gpu
def test_on_a_gpu_the_rows_account_for_the_graph_replayed_step():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    p = profile_step(load_task("softmax", check_null=False))
    assert p.measured and p.graph_us and p.rows
    assert 95 <= p.accounted_pct <= 105, format_step_profile(p)
    assert any(r.kind == "task" for r in p.rows)
    assert all(r.gain is None or r.gain >= 1.0 for r in p.rows)


def _ev(name, kernels=(), children=(), cpu=True, dur=0.0):
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    e = SimpleNamespace(name=name, device_type=DeviceType.CPU if cpu else DeviceType.CUDA, cpu_parent=None,
                        kernels=[SimpleNamespace(name=k, duration=d) for k, d in kernels],
                        cpu_children=list(children), activity_type="kernel",
                        time_range=SimpleNamespace(start=0.0, end=dur))
    for c in children:
        c.cpu_parent = e
    return e


def test_kernels_go_to_the_innermost_op_the_task_range_or_their_own_row():
    from harness.model.step_profile import STEP_RANGE, TASK_RANGE, attribute_kernels

    mm = _ev("aten::mm", kernels=[("gemm", 30.0)])
    matmul = _ev("aten::matmul", children=[mm])
    task = _ev(TASK_RANGE + "softmax", children=[_ev("aten::empty")])
    step = _ev(STEP_RANGE, children=[matmul, task])
    gpu = [_ev("gemm", cpu=False, dur=30.0), _ev("_softmax_kernel", cpu=False, dur=10.0),
           _ev("_other_triton", cpu=False, dur=5.0)]
    times, total, launches = attribute_kernels([step, matmul, mm, task, *gpu], 1,
                                               {"softmax": {"_softmax_kernel"}})
    # aten::mm, the op whose bytes and flops the cost pass counted, not the aten::matmul around it.
    assert times["aten::mm"]["device_us"] == 30.0 and "aten::matmul" not in times
    assert times["softmax (task kernel)"]["device_us"] == 10.0 and times["softmax (task kernel)"]["kind"] == "task"
    assert times["kernel _other_triton"]["kind"] == "unattributed"
    assert total == 45.0 and launches == 3


def test_replay_gaps_measure_the_idle_time_between_a_replays_kernels_overlaps_counted_once():
    from harness.model.step_profile import replay_gaps

    # two replays of three kernels: busy 0-10, 12-20 (15-18 overlaps), idle 10-12 -> span 20, busy 18
    one = [(0.0, 10.0), (12.0, 20.0), (15.0, 18.0)]
    two = [(a + 100, b + 100) for a, b in one]
    g = replay_gaps(two + one, steps=2)
    assert g == {"replay_span_us": 20.0, "replay_busy_us": 18.0, "replay_idle_us": 2.0}


def test_replay_gaps_say_nothing_when_the_replays_do_not_split_evenly():
    from harness.model.step_profile import replay_gaps

    assert replay_gaps([(0.0, 1.0)] * 3, steps=2)["replay_idle_us"] is None
    assert replay_gaps([], steps=2)["replay_span_us"] is None

"""The decision rule and the timing judge, on synthetic samples (no GPU needed)."""
from __future__ import annotations

import math
import random

import pytest

from harness.evaluate import verdict as vd
from harness.evaluate.runner import _Run, scrubbed_env
from harness.evaluate.timing_stage import judge_shape
from harness.authoring.tasks import load_task


def noisy(mu: float, n: int, sigma: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    return [mu * math.exp(rng.gauss(0, sigma)) for _ in range(n)]


def test_aa_is_no_win_and_real_gain_is():
    false_keeps = 0
    for t in range(40):
        sp, band = vd.speedup_with_band(noisy(100, 40, 0.01, t), noisy(100, 40, 0.01, 1000 + t), t)
        false_keeps += (sp - 1) * 100 > band
    assert false_keeps == 0
    sp, band = vd.speedup_with_band(noisy(110, 40, 0.01, 1), noisy(100, 40, 0.01, 2))
    assert sp == pytest.approx(1.1, rel=0.02) and (sp - 1) * 100 > band >= vd.NOISE_FLOOR_PCT


def test_band_grows_with_noise_and_has_a_floor():
    _, quiet = vd.speedup_with_band([100.0] * 40, [100.0] * 40)
    _, loud = vd.speedup_with_band(noisy(100, 40, 0.1, 1), noisy(100, 40, 0.1, 2))
    assert quiet == vd.NOISE_FLOOR_PCT and loud > 3


def test_recommendation_rules():
    rej = vd.recommend(correct=False, guards_ok=False, timing_available=True, geomean_speedup=2.0,
                       noise_band_pct=1.0, slower_shapes=[])
    assert rej["action"] == "revert" and rej["can_keep"] is False
    cpu = vd.recommend(correct=True, guards_ok=True, timing_available=False, geomean_speedup=None,
                       noise_band_pct=None, slower_shapes=[])
    assert cpu["action"] == "revert" and cpu["can_keep"] and "unavailable" in cpu["reason"]
    noise = vd.recommend(correct=True, guards_ok=True, timing_available=True, geomean_speedup=1.008,
                         noise_band_pct=1.0, slower_shapes=[])
    assert noise["action"] == "revert" and "noise" in noise["reason"]
    slow = vd.recommend(correct=True, guards_ok=True, timing_available=True, geomean_speedup=0.764,
                        noise_band_pct=1.0, slower_shapes=[])
    assert slow["action"] == "revert" and slow["reason"].startswith("slower: geomean 0.764x")
    win = vd.recommend(correct=True, guards_ok=True, timing_available=True, geomean_speedup=1.05,
                       noise_band_pct=1.0, slower_shapes=["a"])
    assert win["action"] == "keep" and "slower on a" in win["reason"]


def test_geomean_is_weighted():
    assert vd.geomean([2.0, 1.0], [1, 1]) == pytest.approx(math.sqrt(2))
    assert vd.geomean([2.0, 1.0], [3, 1]) == pytest.approx(2 ** 0.75)
    assert vd.geomean([], []) is None


def _timing_reply(cand_us, inc_us, *, wall_extra=5.0, bad=0, side=0.0):
    def role(us, bad, side):
        return {"event_us": us, "event_all_us": [x + side for x in us], "wall_us": [x + side + wall_extra for x in us],
                "bad": bad, "checked": 45}

    return {"ok": True, "flush_us": 30.0, "observed": [], "roles": {
        "candidate": role(cand_us, bad, side), "incumbent": role(inc_us, 0, 0.0)}}


@pytest.fixture
def judged():
    task = load_task("softmax")

    def judge(reply, *, parent_wall=10.0, floor=(None, ""), baseline=None):
        run = _Run(task, task.baseline_path)
        entry = {"name": "s", "roofline_pct": None}
        judge_shape(run, entry, reply, parent_wall, floor, baseline, {"copy_bw_Bps": 4e12}, 4e8)
        return {r["rule"] for r in run.reasons}, entry

    return judge


def test_judge_accepts_honest_samples(judged):
    rules, entry = judged(_timing_reply(noisy(100, 40, 0.01, 1), noisy(120, 40, 0.01, 2)))
    assert rules == set()
    assert entry["speedup"] == pytest.approx(1.2, rel=0.03) and entry["roofline_pct"] == pytest.approx(100, rel=0.05)


def test_judge_rejects_each_timing_cheat(judged):
    honest = noisy(100, 40, 0.01, 1)
    assert "timed-outputs-correct" in judged(_timing_reply(honest, honest, bad=3))[0]
    # events far below the host clock: a fooled or patched event timer
    assert "timer-disagrees" in judged(_timing_reply([5.0] * 40, honest, wall_extra=400))[0]
    # samples adding up to more time than the parent saw pass
    assert "timer-disagrees" in judged(_timing_reply(honest, honest), parent_wall=0.001)[0]
    assert "impossible-time" in judged(_timing_reply(honest, honest), floor=(150.0, "bytes / copy bandwidth"))[0]
    assert "incumbent-slowed" in judged(_timing_reply(honest, noisy(130, 40, 0.01, 3)), baseline=100.0)[0]
    assert "incumbent-slowed" not in judged(_timing_reply(honest, noisy(103, 40, 0.01, 3)), baseline=100.0)[0]
    # the call's stream done long before the device: work left on a side stream
    assert "no-side-streams" in judged(_timing_reply([5.0] * 40, honest, side=120.0))[0]


def test_scrubbed_env_drops_credentials_and_keeps_what_runs_code():
    env = scrubbed_env({"PATH": "/bin", "HOME": "/root", "OPENAI_API_KEY": "x", "MY_TOKEN": "x", "AWS_REGION": "x",
                        "GOOGLE_APPLICATION_CREDENTIALS": "x", "TRITON_CACHE_DIR": "/c", "CUDA_HOME": "/cuda",
                        "HF_TOKEN": "x", "GITHUB_TOKEN": "x", "SSH_AUTH_SOCK": "/s", "RANDOM_VAR": "x",
                        "TRITON_INTERPRET": "1"}, on_gpu=True, home="/tmp/h")
    assert env["PATH"] == "/bin" and env["TRITON_CACHE_DIR"] == "/c" and env["CUDA_HOME"] == "/cuda"
    assert env["HOME"] == "/tmp/h" and "TRITON_INTERPRET" not in env
    for k in ("OPENAI_API_KEY", "MY_TOKEN", "AWS_REGION", "GOOGLE_APPLICATION_CREDENTIALS", "HF_TOKEN",
              "GITHUB_TOKEN", "SSH_AUTH_SOCK", "RANDOM_VAR"):
        assert k not in env
    assert scrubbed_env({"PATH": "/bin"}, on_gpu=False)["TRITON_INTERPRET"] == "1"


def test_scrubbed_env_keeps_nvlink_multicast_switched_off():
    """Shared GPU hosts turn NVLink multicast off by environment; a child must not lose that."""
    off = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
    env = scrubbed_env({"PATH": "/bin", **off}, on_gpu=True)
    assert {k: env.get(k) for k in off} == off

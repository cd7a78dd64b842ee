"""The ray backend against a real Ray cluster this test starts: a head node plus one more node process.

Marked slow (cluster start takes ~30 s on 2 cores); skipped when Ray isn't installed.
"""
from __future__ import annotations

import os
import signal
import time

import pytest

ray = pytest.importorskip("ray")

from harness.evaluate.backends import EvalJob, RayEvaluator  # noqa: E402

from .conftest import variant  # noqa: E402

pytestmark = pytest.mark.slow


@pytest.fixture
def cluster():
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    c.add_node(num_cpus=1)  # a second node process: the job must survive losing one worker
    try:
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.shutdown()


def test_ray_batch_on_two_nodes_with_a_worker_killed_mid_run(cluster, small_task):
    ev = RayEvaluator(address=cluster.address)
    try:
        workers = ev.workers()
        assert len(workers) == 2  # one actor per CPU of the cluster: one on each node
        base = small_task.baseline_path.read_text()
        specs = [(256, 4, False), (128, 4, True), (512, 2, False)]
        jobs = [EvalJob(small_task.name, str(small_task.root), variant(*s), base, i, {})
                for i, s in enumerate(specs, 1)]
        futs = [ev.submit(j) for j in jobs]
        deadline = time.monotonic() + 120
        victim = None
        while victim is None and time.monotonic() < deadline:
            victim = next((w for w in ev.workers() if w["state"] == "busy" and w["iteration"] == 1), None)
            time.sleep(0.05)
        assert victim is not None, ev.workers()
        os.kill(victim["pid"], signal.SIGKILL)  # the actor's process dies mid-evaluation
        verdicts = [f.result(timeout=300) for f in futs]
        assert [v["accepted"] for v in verdicts] == [True, False, True]
        assert verdicts[1]["stage"] == "correctness"
        assert verdicts[0]["worker"]["attempts"] == 2 and verdicts[0]["worker"]["name"] != victim["name"]
        assert all(v["worker"]["backend"] == "ray" for v in verdicts)
        # The task's files travelled with the job (other nodes can't be assumed to have kernels/<task>).
        assert all(v["task"] == "softmax" and v["shapes"] for v in verdicts if v["accepted"])
        assert ev.submit(jobs[2]) is futs[2]
    finally:
        ev.close()

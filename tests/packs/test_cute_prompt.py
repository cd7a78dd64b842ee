"""A CuTe DSL task's prompt on the H200 (issue 23): the default selection brings the detected GPU's
hardware pack and the task's rules packs, and the prompt carries dsl-cute (its never-do list and its
CuTe DSL idioms) and the hardware pack's TMA / wgmma / warp-specialisation guidance."""
from __future__ import annotations

from pathlib import Path

from harness.authoring.packs import default_selection, discover
from harness.prompt import build_prompt
from harness.authoring.tasks import load_task

REPO = Path(__file__).resolve().parents[2]


def test_a_cute_task_prompt_carries_dsl_cute_and_the_hopper_guidance():
    task = load_task(REPO / "kernels" / "rmsnorm_cute")
    catalog = discover()
    ids = default_selection(task, catalog, arch="sm_90a", gpu_name="NVIDIA H200")
    assert ids[0] == "h200" and "dsl-cute" in ids and "dsl-triton" not in ids
    p = build_prompt(task, task.baseline_path.read_text(), [catalog.get(i) for i in ids])
    assert "CuTe DSL (nvidia-cutlass-dsl)" in p.system            # the DSL requirement
    assert "- [cute-kernel] " in p.system and "(dsl-cute; static check)" in p.system  # its never-do list
    u = p.user
    assert '<pack id="dsl-cute"' in u and "# CuTe DSL idioms" in u and "make_tiled_tma_atom" in u
    assert '<pack id="h200"' in u
    for hopper in ("TMA (Tensor Memory Accelerator)", "wgmma", "Warp specialization on Hopper", "setmaxnreg"):
        assert hopper in u, hopper
    assert not p.cut  # nothing of it cut for the token budget
    assert "def rmsnorm(x, weight)" in u and "@cute.kernel" in u  # the task and its CuTe incumbent

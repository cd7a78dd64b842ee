"""End-to-end workload for softmax (and rmsnorm): one decode step of a tiny decoder block.

    h = rmsnorm(x, w_in); q = h @ Wq; scores = q·K^T / sqrt(d)      (per head, against a KV cache)
    p = softmax(scores); o = p·V; x2 = x + o @ Wo; out = rmsnorm(x2, w_out) @ W_up

The contract (harness.e2e): `TASKS` names the tasks whose kernels plug in; `build(kernels, device)`
gets {task name: function} (absent tasks use their default.py: torch's op) and returns an object
whose `run()` does one step on buffers it owns (fixed addresses, so the harness can capture it in a
CUDA graph) and returns the output. Sizes: a decode batch of 32 against a 4k-token cache on a GPU
(keywords override them); tiny on the CPU (Triton interpreter).
"""
from __future__ import annotations

import importlib.util
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

TASKS = ("rmsnorm", "softmax")
# bf16 outputs after three matmuls: one bf16 rounding step near 2.0 is 0.0156, so kernels that are
# each within their task's tolerance may differ by a few of those here.
TOLERANCE = (5e-2, 5e-2)


def _load_default(task: str):
    """The task's default (kernels/<task>/default.py): what runs where no kernel is plugged in."""
    path = Path(__file__).resolve().parent.parent / task / "default.py"
    if not path.is_file():  # this file copied elsewhere (a task copy): find the task where warpsmith does
        from harness.tasks import find_task_dir

        path = find_task_dir(task) / "default.py"
    spec = importlib.util.spec_from_file_location(f"warpsmith_e2e_default_{task}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, task)


@dataclass
class DecodeStep:
    rmsnorm: Callable
    softmax: Callable
    tensors: dict
    batch: int
    heads: int
    head_dim: int
    context: int

    @property
    def description(self) -> str:
        return (f"decode step: batch {self.batch}, {self.heads} heads x {self.head_dim}, "
                f"context {self.context}, hidden {self.heads * self.head_dim}")

    def run(self) -> torch.Tensor:
        t, B, H, D = self.tensors, self.batch, self.heads, self.head_dim
        h = self.rmsnorm(t["x"], t["w_in"])
        q = (h @ t["wq"]).view(B, H, 1, D)
        scores = (q @ t["k"].transpose(-1, -2)).view(B * H, self.context) * (1.0 / math.sqrt(D))
        p = self.softmax(scores).view(B, H, 1, self.context)
        o = (p @ t["v"]).reshape(B, H * D)
        x2 = t["x"] + o @ t["wo"]
        return self.rmsnorm(x2, t["w_out"]) @ t["w_up"]


def build(kernels: dict, device: str, batch: int | None = None, heads: int | None = None,
          head_dim: int | None = None, context: int | None = None) -> DecodeStep:
    gpu = str(device).startswith("cuda")
    B, H, D, ctx = (32, 32, 128, 4096) if gpu else (2, 2, 16, 96)
    B, H, D, ctx = int(batch or B), int(heads or H), int(head_dim or D), int(context or ctx)
    hidden = H * D
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g) * scale).to(torch.bfloat16).to(device)

    tensors = {
        "x": rand(B, hidden),
        "w_in": (0.5 + torch.rand(hidden, generator=g)).to(torch.bfloat16).to(device),
        "w_out": (0.5 + torch.rand(hidden, generator=g)).to(torch.bfloat16).to(device),
        "wq": rand(hidden, hidden, scale=hidden ** -0.5),
        "wo": rand(hidden, hidden, scale=hidden ** -0.5),
        "w_up": rand(hidden, 2 * hidden, scale=hidden ** -0.5),
        "k": rand(B, H, ctx, D),
        "v": rand(B, H, ctx, D),
    }
    return DecodeStep(kernels.get("rmsnorm") or _load_default("rmsnorm"), kernels.get("softmax") or _load_default("softmax"),
                      tensors, B, H, D, ctx)

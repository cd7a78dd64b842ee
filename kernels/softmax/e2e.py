"""End-to-end workload for softmax (and rmsnorm): one step of a small decoder block.

    h = rmsnorm(x, w_in); q = h @ Wq; scores = q·K^T / sqrt(d)   (grouped-query heads)
    p = softmax(scores); o = p·V; x2 = x + o @ Wo; out = rmsnorm(x2, w_out) @ W_up

mode="decode" (default): a batch of new tokens against a KV cache; mode="prefill": the whole
context at once, unfused attention, where softmax over context x context scores weighs most.

The contract (harness.model.e2e): `TASKS` names the tasks whose kernels plug in; `build(kernels, device)`
gets {task name: function} (absent tasks use their default.py: torch's op) and returns an object
whose `run()` does one step on buffers it owns (fixed addresses, so the harness can capture it in a
CUDA graph) and returns the output. Sizes on a GPU: batch 32 against a 4k-token cache (decode), or
4k tokens (prefill); keywords override them; tiny on the CPU (Triton interpreter).
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
        from harness.authoring.tasks import find_task_dir

        path = find_task_dir(task) / "default.py"
    spec = importlib.util.spec_from_file_location(f"warpsmith_e2e_default_{task}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return getattr(mod, task)


@dataclass
class Block:
    """One attention + MLP block step. decode: `batch` sequences, one new token each, against a KV
    cache of `context` tokens (grouped-query: `kv_heads` K/V heads). prefill: `batch` x `context`
    tokens attending to each other without a mask (encoder-style, unfused attention), where the
    context x context softmax is a large share of the time."""

    rmsnorm: Callable
    softmax: Callable
    tensors: dict
    mode: str
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    context: int

    @property
    def description(self) -> str:
        return (f"{self.mode} step: batch {self.batch}, {self.heads} heads ({self.kv_heads} kv) x {self.head_dim}, "
                f"context {self.context}, hidden {self.heads * self.head_dim}")

    def run(self) -> torch.Tensor:
        t, B, H, Hk, D, T = self.tensors, self.batch, self.heads, self.kv_heads, self.head_dim, self.context
        G = H // Hk
        x = t["x"]  # decode: [B, hidden]; prefill: [B * T, hidden]
        q_len = 1 if self.mode == "decode" else T
        h = self.rmsnorm(x, t["w_in"])
        q = (h @ t["wq"]).view(B, q_len, Hk, G, D).permute(0, 2, 3, 1, 4).reshape(B, Hk, G * q_len, D)
        if self.mode == "decode":
            k, v = t["k"], t["v"]  # the cache: [B, Hk, T, D]
        else:
            kv = (h @ t["wkv"]).view(B, T, 2, Hk, D)
            k, v = kv[:, :, 0].transpose(1, 2), kv[:, :, 1].transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D))  # [B, Hk, G * q_len, T]
        p = self.softmax(scores.reshape(-1, T)).view(B, Hk, G * q_len, T)
        o = (p @ v).view(B, Hk, G, q_len, D).permute(0, 3, 1, 2, 4).reshape(B * q_len, H * D)
        x2 = x + o @ t["wo"]
        return self.rmsnorm(x2, t["w_out"]) @ t["w_up"]


DecodeStep = Block  # the name the first version exported


def build(kernels: dict, device: str, mode: str = "decode", batch: int | None = None, heads: int | None = None,
          kv_heads: int | None = None, head_dim: int | None = None, context: int | None = None) -> Block:
    if mode not in ("decode", "prefill"):
        raise ValueError(f"mode must be decode or prefill, not {mode!r}")
    gpu = str(device).startswith("cuda")
    if gpu:
        B, H, Hk, D, T = (32, 32, 8, 128, 4096) if mode == "decode" else (1, 32, 8, 128, 4096)
    else:
        B, H, Hk, D, T = (2, 4, 2, 16, 96) if mode == "decode" else (1, 4, 2, 16, 64)
    B, H, Hk, D, T = (int(batch or B), int(heads or H), int(kv_heads or Hk), int(head_dim or D), int(context or T))
    if H % Hk:
        raise ValueError(f"heads ({H}) must be a multiple of kv_heads ({Hk})")
    hidden = H * D
    # Random values made on the device (a 1 GB cache made on the host would dominate build time);
    # same seed, same device: every configuration sees the same numbers.
    g = torch.Generator(device=device).manual_seed(0)

    def rand(*shape, scale=1.0):
        return (torch.randn(*shape, generator=g, device=device) * scale).to(torch.bfloat16)

    def weight(n):
        return (0.5 + torch.rand(n, generator=g, device=device)).to(torch.bfloat16)

    rows = B if mode == "decode" else B * T
    tensors = {"x": rand(rows, hidden), "w_in": weight(hidden), "w_out": weight(hidden),
               "wq": rand(hidden, hidden, scale=hidden ** -0.5), "wo": rand(hidden, hidden, scale=hidden ** -0.5),
               "w_up": rand(hidden, 2 * hidden, scale=hidden ** -0.5)}
    if mode == "decode":
        tensors["k"], tensors["v"] = rand(B, Hk, T, D), rand(B, Hk, T, D)
    else:
        tensors["wkv"] = rand(hidden, 2 * Hk * D, scale=hidden ** -0.5)
    return Block(kernels.get("rmsnorm") or _load_default("rmsnorm"),
                 kernels.get("softmax") or _load_default("softmax"), tensors, mode, B, H, Hk, D, T)

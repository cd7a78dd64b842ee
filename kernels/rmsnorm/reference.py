"""Reference for the rmsnorm task: fp32 math, bf16 out, eps 1e-6."""
import torch

EPS = 1e-6


def make_inputs(dims, dtype, seed, device):
    g = torch.Generator(device=device).manual_seed(seed)  # on the device: see softmax's reference
    x = torch.randn(dims["rows"], dims["cols"], generator=g, dtype=torch.float32, device=device) * 2.0
    # Weights away from 1 so that forgetting them fails the check.
    w = 0.5 + torch.rand(dims["cols"], generator=g, dtype=torch.float32, device=device)
    return x.to(dtype=dtype), w.to(dtype=dtype)


def reference(x, weight):
    xf = x.float()
    rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (xf * rms * weight.float()).to(x.dtype)


def bytes_moved(dims, dtype):
    es = torch.empty((), dtype=dtype).element_size()
    return (2 * dims["rows"] * dims["cols"] + dims["cols"]) * es


def flops(dims):
    return 4 * dims["rows"] * dims["cols"]

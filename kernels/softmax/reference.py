"""Reference for the softmax task: fp32 math, bf16 out."""
import torch


def make_inputs(dims, dtype, seed, device):
    # Generated on the device itself: the harness makes every call's inputs twice (its copy and the
    # candidate's), and on a CPU generator a 128k-column shape took seconds each time.
    g = torch.Generator(device=device).manual_seed(seed)
    # Scale 4 gives rows with a few dominant entries, so max-subtraction matters.
    x = torch.randn(dims["rows"], dims["cols"], generator=g, dtype=torch.float32, device=device) * 4.0
    return (x.to(dtype=dtype),)


def reference(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def bytes_moved(dims, dtype):
    n = dims["rows"] * dims["cols"]
    return 2 * n * torch.empty((), dtype=dtype).element_size()


def flops(dims):
    return 5 * dims["rows"] * dims["cols"]

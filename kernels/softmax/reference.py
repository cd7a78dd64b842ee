"""Reference for the softmax task: fp32 math, bf16 out."""
import torch

# Inputs that test the contract (issue 17): checked on every candidate, correctness only. The
# harness passes the case's name as dims["case"] (harness.authoring.tasks.hard_cases).
HARD_CASES = {
    "huge values": "logits of magnitude ~1e4 (bf16 holds them): exp without the max shift overflows to inf",
    "-inf masks": "a random share of every row is -inf, as attention masks make it, one entry at least finite",
    "constant rows": "every entry of a row equal, from ±1 to ±1e4: the output is exactly 1/cols",
    "one huge value": "one entry per row 1e4, the rest randn: the output is one-hot",
}


def fill_inputs(xs, dims, seed):
    """make_inputs(dims, x.dtype, seed, x.device)'s values written into xs, an earlier make_inputs
    result of the same dims, dtype and device (the harness refills a timed batch's inputs in place with
    it). One kernel writing the dtype directly: the fp32 draw, scale and cast it replaced made ~11x the
    memory traffic (prep was 5.6 s of a softmax eval on the H200). False for a hard case (not made so)."""
    if dims.get("case") is not None:
        return False
    (x,) = xs
    # Generated on the device itself: the harness makes every call's inputs twice (its copy and the
    # candidate's), and on a CPU generator a 128k-column shape took seconds each time.
    g = torch.Generator(device=x.device).manual_seed(seed)
    # Scale 4 gives rows with a few dominant entries, so max-subtraction matters (drawn in fp32,
    # rounded once to the dtype).
    x.normal_(0.0, 4.0, generator=g)
    return True


def make_inputs(dims, dtype, seed, device):
    rows, cols = dims["rows"], dims["cols"]
    case = dims.get("case")
    if case is None:
        x = torch.empty(rows, cols, dtype=dtype, device=device)
        fill_inputs((x,), dims, seed)  # the timed batches' refill: the same values by construction
        return (x,)
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(rows, cols, generator=g, dtype=torch.float32, device=device) * 4.0
    if case == "huge values":
        x = x * 2500.0
    elif case == "-inf masks":
        keep = torch.rand(rows, cols, generator=g, device=device) < torch.rand(rows, 1, generator=g, device=device)
        keep[torch.arange(rows, device=device), torch.randint(0, cols, (rows,), generator=g, device=device)] = True
        x = x.masked_fill(~keep, float("-inf"))
    elif case == "constant rows":
        mag = torch.pow(10.0, torch.randint(0, 5, (rows, 1), generator=g, device=device).float())
        sign = torch.randn(rows, 1, generator=g, device=device).sign()
        # Both extremes in every input, whatever the seed: a row of -1e4 is where a max taken
        # with 0.0 as the padding (max(0, row max)) underflows to 0/0; it passed when no row drew it.
        mag[0], sign[0] = 1e4, -1.0
        if rows > 1:
            mag[1], sign[1] = 1e4, 1.0
        x = (sign * mag).expand(rows, cols).contiguous()
    elif case == "one huge value":
        x[torch.arange(rows, device=device), torch.randint(0, cols, (rows,), generator=g, device=device)] = 1e4
    elif case is not None:
        raise ValueError(f"unknown hard case {case!r}")
    return (x.to(dtype=dtype),)


def reference(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def bytes_moved(dims, dtype):
    n = dims["rows"] * dims["cols"]
    return 2 * n * torch.empty((), dtype=dtype).element_size()


def flops(dims):
    return 5 * dims["rows"] * dims["cols"]

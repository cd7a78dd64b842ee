"""DeepSeek V4 CSA sparse decode reading the compressed entries from FlashMLA's FP8 "MODEL1" cache
layout (stretch variant of dsv4_csa_decode: same attention, same inputs except comp_cache).

Layout and dequantisation exactly as deepseek-ai/FlashMLA `tests/quant.py` (@ 520fec6):
`FP8KVCacheLayout.MODEL1_FP8Sparse.get_meta()` = (d 512, d_nope 448, d_rope 64, tile 64, 7 tiles);
`quantize_k_cache` / `dequantize_k_cache` MODEL1 branch:
  per token 584 bytes = 448 e4m3 NoPE values + 64 bf16 RoPE values (128 bytes), stored block-wise:
  a block of `block_size` tokens holds block_size x 576 bytes of [nope | rope], then block_size x 8
  bytes of scales (7 ue8m0 = float8_e8m0fnu, one per 64 NoPE values, + 1 pad byte), and the block
  is padded to a multiple of 576 bytes.
  scale = 2^ceil(log2(max(amax_tile / 448, 1e-4))); nope = (x / scale).to(float8_e4m3fn);
  dequant: nope.to(bf16) * scale.to(bf16) (exact: a power-of-two scaling of an e4m3 value).
Here block_size is 64 (FlashMLA's MODEL1 tests use 64 for the extra/compressed cache) and each
sequence owns its blocks in order: entry j of sequence b lives in comp_cache[b, j // 64], slot j % 64
(a paged cache would add a block table; the bytes read per entry are the same).
The sliding window stays bf16 [B, 128, 512] (as DS's own inference code keeps its kv_cache).

Semantics of the attention: kernels/dsv4_csa_decode/reference.py (DS model.py `Attention.forward`,
kernel.py `sparse_attn_kernel`); this module dequantises the gathered entries and calls it.
"""
import functools
import importlib.util
from pathlib import Path

import torch

D, D_NOPE, D_ROPE, TILE, N_TILES = 512, 448, 64, 64, 7
BLOCK_SIZE = 64
ROW_BYTES = D_NOPE + 2 * D_ROPE                     # 576: fp8 nope + bf16 rope
BYTES_PER_TOKEN = ROW_BYTES + N_TILES + 1           # 584 with the scales and their pad byte


def _load_bf16_task():
    path = Path(__file__).resolve().parent.parent / "dsv4_csa_decode" / "reference.py"
    if not path.is_file():
        # The evaluator's child gets a copy of this task's folder alone (runner.ChildProcess.stage):
        # the sibling task is then found where tasks are (./kernels, WARPSMITH_KERNELS, built-in).
        from harness.authoring.tasks import find_task_dir

        path = find_task_dir("dsv4_csa_decode") / "reference.py"
    spec = importlib.util.spec_from_file_location("dsv4_csa_decode_reference_for_fp8", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BF16_TASK = _load_bf16_task()


def block_bytes(block_size: int = BLOCK_SIZE) -> int:
    return (block_size * BYTES_PER_TOKEN + 576 - 1) // 576 * 576


def token_bytes(x: torch.Tensor) -> torch.Tensor:
    """bf16 [..., 512] -> uint8 [..., 583]: one token as FlashMLA quantize_k_cache (MODEL1) stores it, the
    576-byte row (e4m3 NoPE, then the bf16 RoPE bytes) and the 7 ue8m0 scales (the pad byte after them is
    left to the caller). The 7 tiles at once: ~10 launches however many tokens (a refill quantises the
    entries a set's indices name)."""
    # A 584-byte row (even: the bf16 bytes are viewed as bf16), of which the pad byte is not returned.
    out = torch.empty(*x.shape[:-1], BYTES_PER_TOKEN, dtype=torch.uint8, device=x.device)
    nope = x[..., :D_NOPE].unflatten(-1, (N_TILES, TILE))
    s = torch.linalg.vector_norm(nope, ord=float("inf"), dim=-1, dtype=torch.float32)  # amax |x| a tile
    s.div_(448.0).clamp_min_(1e-4).log2_().ceil_().exp2_()   # ue8m0, as _cast_scale_inv_to_ue8m0
    torch.div(nope, s[..., None], out=out[..., :D_NOPE].view(torch.float8_e4m3fn).unflatten(-1, (N_TILES, TILE)))
    out[..., D_NOPE:ROW_BYTES].view(torch.bfloat16).copy_(x[..., D_NOPE:])
    out[..., ROW_BYTES:ROW_BYTES + N_TILES].view(torch.float8_e8m0fnu).copy_(s)
    return out[..., :ROW_BYTES + N_TILES]


def quantize(cache: torch.Tensor, block_size: int = BLOCK_SIZE, out: torch.Tensor | None = None) -> torch.Tensor:
    """bf16 [B, N, 512] -> uint8 [B, ceil(N/bs), block_bytes]: FlashMLA quantize_k_cache (MODEL1).
    With out (uint8 of that shape) it is written there, padding zeroed as in a new one."""
    B, N, d = cache.shape
    nblk = -(-N // block_size)
    # Each sequence's last block is padded with zero tokens.
    x = cache if N == nblk * block_size else torch.cat([cache, cache.new_zeros(B, nblk * block_size - N, d)], 1)
    x = x.reshape(B * nblk, block_size, d)
    if out is None:
        out = torch.zeros(B * nblk, block_bytes(block_size), dtype=torch.uint8, device=cache.device)
    else:
        out = out.view(B * nblk, block_bytes(block_size))
        out.zero_()
    packed = token_bytes(x)
    out[:, :block_size * ROW_BYTES] = packed[..., :ROW_BYTES].reshape(B * nblk, -1)
    out[:, block_size * ROW_BYTES:block_size * BYTES_PER_TOKEN].view(B * nblk, block_size, 8)[..., :N_TILES] = \
        packed[..., ROW_BYTES:]
    return out.view(B, nblk, -1)


_PLACES: dict[tuple, torch.Tensor] = {}


def _places(n_entries: int, block_size: int, device) -> torch.Tensor:
    """int64 [n_entries, 2]: where entry j's bytes are, as the number of its 576-byte row and of its
    8-byte scale unit in its sequence's blocks (a block, block_bytes, is a whole number of both)."""
    key = (n_entries, block_size, str(device))
    if key not in _PLACES:
        j = torch.arange(n_entries)
        blk, slot = j // block_size, j % block_size
        rows_a_block, units_a_block = block_bytes(block_size) // ROW_BYTES, block_bytes(block_size) // 8
        _PLACES[key] = torch.stack([blk * rows_a_block + slot,
                                    blk * units_a_block + block_size * ROW_BYTES // 8 + slot], 1).to(device)
    return _PLACES[key]


def write_entry_rows(comp_fp8: torch.Tensor, seq: torch.Tensor, entries: torch.Tensor, rows: torch.Tensor,
                     n_entries: int, block_size: int = BLOCK_SIZE) -> None:
    """The bf16 task's write_entry_rows on the FP8 blocks: entry j = entries[b, s] of sequence seq[b]
    gets rows[b, s]'s bytes where quantize puts them (its row in block j // 64, its scales after the
    block's rows). j = -1 is the last entry (n_entries - 1), invisible then, and its row is garbage."""
    B, nblk, nbytes = comp_fp8.shape
    at = _places(n_entries, block_size, comp_fp8.device)[entries]
    packed = token_bytes(rows)
    comp_fp8.view(B, nblk * nbytes // ROW_BYTES, ROW_BYTES).index_put_((seq, at[..., 0]), packed[..., :ROW_BYTES])
    comp_fp8.view(B, nblk * nbytes // 8, 8)[..., :N_TILES].index_put_((seq, at[..., 1]), packed[..., ROW_BYTES:])


def dequantize_entries(comp_fp8: torch.Tensor, indices: torch.Tensor, block_size: int = BLOCK_SIZE) -> torch.Tensor:
    """The entries named by indices [B, K] (-1 -> zeros), dequantised as FlashMLA dequantize_k_cache."""
    B, nblk, nbytes = comp_fp8.shape
    idx = indices.clamp(min=0).long()
    blocks = torch.gather(comp_fp8, 1, (idx // block_size)[..., None].expand(-1, -1, nbytes))  # [B, K, bytes]
    slot = (idx % block_size)[..., None]
    row = torch.gather(blocks, 2, slot * ROW_BYTES + torch.arange(ROW_BYTES, device=idx.device))
    sc = torch.gather(blocks, 2, block_size * ROW_BYTES + slot * 8 + torch.arange(N_TILES, device=idx.device))
    out = torch.empty(*idx.shape, D, dtype=torch.bfloat16, device=idx.device)
    out[..., D_NOPE:] = row[..., D_NOPE:].contiguous().view(torch.bfloat16)
    nope = row[..., :D_NOPE].contiguous().view(torch.float8_e4m3fn)
    scale = sc.contiguous().view(torch.float8_e8m0fnu)
    for t in range(N_TILES):
        out[..., t * TILE:(t + 1) * TILE] = nope[..., t * TILE:(t + 1) * TILE].to(torch.bfloat16) * \
            scale[..., t].to(torch.bfloat16)[..., None]
    return torch.where((indices >= 0)[..., None], out, torch.zeros_like(out))


# The bf16 task's hard cases (positions at the masks' edges, extreme sinks), on the FP8 cache.
HARD_CASES = BF16_TASK.HARD_CASES


def make_inputs(dims, dtype, seed, device):
    q, kvw, wl, comp, idx, sinks, cos, sin = BF16_TASK.make_inputs(dims, dtype, seed, device)
    return q, kvw, wl, quantize(comp), idx, sinks, cos, sin


# As the bf16 task: the cache is refilled only at the entries the new indices name (their 584 bytes).
FILL_READS_ONLY = BF16_TASK.FILL_READS_ONLY


def fill_inputs(xs, dims, seed):
    """make_inputs(dims, dtype, seed, device)'s values written into xs, an earlier make_inputs result of
    the same dims, dtype and device, wherever reference() reads them: the bf16 task's rows-only refill
    with the named entries quantised into their blocks (the harness refills a timed batch's inputs with it)."""
    write = functools.partial(write_entry_rows, n_entries=dims["ctx"] // 4)
    BF16_TASK.build_inputs(dims, xs[0].dtype, seed, xs[0].device, out=xs, rows_only=True, write_rows=write,
                           **BF16_TASK._knobs(dims, seed))
    return True


def input_bytes(dims, dtype):
    """What make_inputs allocates: the bf16 task's inputs with the cache as FP8 blocks of 64 entries."""
    B, n4 = dims["batch"], dims["ctx"] // 4
    bf16_cache = B * n4 * D * torch.empty((), dtype=dtype).element_size()
    return BF16_TASK.input_bytes(dims, dtype) - bf16_cache + B * -(-n4 // BLOCK_SIZE) * block_bytes()


def reference(q, kv_window, window_len, comp_fp8, indices, sinks, cos, sin):
    rows = dequantize_entries(comp_fp8, indices)
    local = torch.where(indices >= 0, torch.arange(indices.shape[1], device=indices.device)[None, :], -1)
    return BF16_TASK.reference(q, kv_window, window_len, rows, local.to(torch.int32), sinks, cos, sin)


def bytes_moved(dims, dtype):
    es = torch.empty((), dtype=dtype).element_size()
    B, H, topk = dims["batch"], dims["heads"], dims["topk"]
    lens = BF16_TASK.spread_lengths(dims)
    win = sum(min(L, 128) for L in lens)
    ent = sum(min(topk, L // 4) for L in lens)
    return 2 * B * H * D * es + win * D * es + ent * BYTES_PER_TOKEN + B * topk * 4 + B * 4 + H * 4 + 2 * B * 32 * 4


def flops(dims):
    return BF16_TASK.flops(dims)

"""Baseline RMSNorm in CuTe DSL: a row per warp (short rows) or per CTA (long rows), 128-bit loads.

Each thread owns every `group`-th chunk of `vec` contiguous elements of its row (vec = 8 bf16 =
16 bytes where the width and the pointers allow it, else 4, 2, 1). The first `k_reg` chunks a
thread loads stay in registers for the scaling pass, the next `k_smem` in shared memory (a 128k
row fits whole: 32 KB of registers, 224 KB of shared memory); whatever is left of a longer row is
read again (from L2). The sum of squares is reduced across the warp with shuffles, then across the
warps of a row through a few words of shared memory. fp32 math, bf16 out.

Compiled once per (row width, vector width); the row count is a runtime argument.
"""
import torch
import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
from cutlass.cute.runtime import make_ptr

EPS = 1e-6
WARP = 32
SMEM_CACHE_BYTES = 224 * 1024  # of the 227 KB a CTA may have on Hopper (the reduction needs < 200 bytes)


class _RmsNorm:
    """Launch shape for one row width: chosen on the host, baked into the compiled kernel."""

    def __init__(self, n_cols: int, vec: int):
        self.n = n_cols
        self.vec = vec
        self.chunks = n_cols // vec
        # The smallest power-of-two group of threads per row whose share fits 64 elements each.
        group = WARP
        while group < 1024 and -(-self.chunks // group) * vec > 64:
            group *= 2
        self.group = group
        self.warps = group // WARP                       # warps per row
        self.rows_per_cta = 4 if group == WARP else 1    # short rows: 4 rows (one per warp) per CTA
        self.threads = group * self.rows_per_cta
        self.k_total = -(-self.chunks // group)          # chunks per thread
        # Registers for the row: 1024 threads leave 64 registers each, so hold a quarter as much there.
        budget = 64 if self.threads <= 512 else 16
        self.k_reg = max(1, min(self.k_total, budget // vec))
        # Then shared memory (one row per CTA only): its chunk j is vec elements at j * vec.
        per_chunk = group * vec * 2
        self.k_smem = min(self.k_total - self.k_reg, SMEM_CACHE_BYTES // per_chunk) if self.rows_per_cta == 1 else 0
        self.k_hbm = self.k_reg + self.k_smem          # chunks from here on are read twice

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        n_rows = mX.shape[0]
        lane = tidx % self.group
        row = bidx * self.rows_per_cta + tidx // self.group
        # A warp past the last row (short rows, 4 per CTA) recomputes the last row and stores nothing.
        src_row = cutlass.min(row, n_rows - 1)
        gX = cute.local_tile(mX, (1, self.vec), (src_row, None))   # (1, vec, chunks)
        gY = cute.local_tile(mY, (1, self.vec), (src_row, None))
        gW = cute.local_tile(mW, (self.vec,), (None,))             # (vec, chunks)

        smem = cutlass.utils.SmemAllocator()
        cached = None
        if cutlass.const_expr(self.k_smem > 0):
            cached = smem.allocate_tensor(mX.element_type, cute.make_layout((self.vec, self.k_smem * self.group)),
                                          byte_alignment=16)
        held = cute.make_rmem_tensor((self.vec, self.k_reg), mX.element_type)
        acc = cutlass.Float32(0.0)
        for k in cutlass.range_constexpr(self.k_reg):
            c = lane + k * self.group
            if c < self.chunks:
                v = gX[0, None, c].load()
                held[None, k].store(v)
                vf = v.to(cutlass.Float32)
                acc += (vf * vf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
        if cutlass.const_expr(self.k_smem > 0):
            for k in cutlass.range(self.k_reg, self.k_hbm, 1, unroll=4):
                c = lane + k * self.group
                if c < self.chunks:
                    v = gX[0, None, c].load()
                    cached[None, c - self.k_reg * self.group].store(v)
                    vf = v.to(cutlass.Float32)
                    acc += (vf * vf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
        for k in cutlass.range(self.k_hbm, self.k_total, 1, unroll=4):
            c = lane + k * self.group
            if c < self.chunks:
                vf = gX[0, None, c].load().to(cutlass.Float32)
                acc += (vf * vf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)

        acc = cute.arch.warp_reduction_sum(acc)
        if cutlass.const_expr(self.warps > 1):
            partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout((self.warps,)), byte_alignment=16)
            if tidx % WARP == 0:
                partial[tidx // WARP] = acc
            cute.arch.sync_threads()
            acc = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(self.warps):
                acc += partial[i]
        rstd = cute.math.rsqrt(acc / self.n + eps)

        if row < n_rows:
            for k in cutlass.range_constexpr(self.k_reg):
                c = lane + k * self.group
                if c < self.chunks:
                    w = gW[None, c].load().to(cutlass.Float32)
                    out = held[None, k].load().to(cutlass.Float32) * rstd * w
                    gY[0, None, c].store(out.to(mY.element_type))
            if cutlass.const_expr(self.k_smem > 0):
                for k in cutlass.range(self.k_reg, self.k_hbm, 1, unroll=4):
                    c = lane + k * self.group
                    if c < self.chunks:
                        w = gW[None, c].load().to(cutlass.Float32)
                        out = cached[None, c - self.k_reg * self.group].load().to(cutlass.Float32) * rstd * w
                        gY[0, None, c].store(out.to(mY.element_type))
            for k in cutlass.range(self.k_hbm, self.k_total, 1, unroll=4):
                c = lane + k * self.group
                if c < self.chunks:
                    w = gW[None, c].load().to(cutlass.Float32)
                    out = gX[0, None, c].load().to(cutlass.Float32) * rstd * w
                    gY[0, None, c].store(out.to(mY.element_type))

    @cute.jit
    def __call__(self, x_ptr: cute.Pointer, w_ptr: cute.Pointer, y_ptr: cute.Pointer, n_rows: cutlass.Int32,
                 eps: cutlass.Float32, stream):
        # The row width is static (vector alignment follows from it); the row count is not.
        mX = cute.make_tensor(x_ptr, cute.make_layout((n_rows, self.n), stride=(self.n, 1)))
        mY = cute.make_tensor(y_ptr, cute.make_layout((n_rows, self.n), stride=(self.n, 1)))
        mW = cute.make_tensor(w_ptr, cute.make_layout((self.n,), stride=(1,)))
        # (shared memory: the DSL sizes the launch from what the kernel allocates)
        self.kernel(mX, mW, mY, eps).launch(
            grid=(cute.ceil_div(n_rows, self.rows_per_cta), 1, 1), block=(self.threads, 1, 1), stream=stream)


def _vector_width(n_cols, *tensors):
    """Elements per load: 8 bf16 (16 bytes) when the row width and every base pointer allow it."""
    for vec in (8, 4, 2):
        nbytes = vec * tensors[0].element_size()
        if n_cols % vec == 0 and all(t.data_ptr() % nbytes == 0 for t in tensors):
            return vec
    return 1


_COMPILED = {}


def rmsnorm(x, weight):
    x = x.contiguous()
    weight = weight.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    vec = _vector_width(cols, x, weight, y)
    align = vec * x.element_size()
    px = make_ptr(cutlass.BFloat16, x.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)
    pw = make_ptr(cutlass.BFloat16, weight.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)
    py = make_ptr(cutlass.BFloat16, y.data_ptr(), cute.AddressSpace.gmem, assumed_align=align)
    # The caller's stream: a CUDA graph capture (and any stream the caller picked) sees the launch.
    stream = cutlass_torch.current_stream()
    key = (cols, vec)
    fn = _COMPILED.get(key)
    if fn is None:
        fn = cute.compile(_RmsNorm(cols, vec), px, pw, py, rows, EPS, stream)
        _COMPILED[key] = fn
    fn(px, pw, py, rows, EPS, stream)
    return y

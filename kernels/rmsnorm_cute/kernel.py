"""Baseline RMSNorm in CuTe DSL: a row per warp (short rows), per CTA (mid rows) or per cluster of CTAs
(long rows), 128-bit loads.

Each thread owns every `group`-th chunk of `vec` contiguous elements of its (slice of a) row (vec = 8
bf16 = 16 bytes where the width and the pointers allow it, else 4, 2, 1). The first `k_reg` chunks a
thread loads stay in registers for the scaling pass, the next `k_smem` in shared memory; whatever is
left of a longer slice is read again (from L2). The sum of squares is reduced across the warp with
shuffles, then across the warps of a row through a few words of shared memory, then (long rows)
across the CTAs of a thread-block cluster through distributed shared memory.

Why clusters for long rows: one 1024-thread CTA per 128k row held one CTA per SM, with its read and
write phases never overlapping and 512 rows over 132 SMs in ~4 waves. Split over a cluster of 2-8
CTAs (8 for 128k, as QuACK's CuTe DSL RMSNorm splits bf16 rows), each holds a slice of at most 32 KB
(64 KB for 256k rows) in registers, several CTAs share an SM (one reads while another writes) and the
waves are finer; the only cross-CTA traffic is one float per CTA.

Compiled once per launch plan (row width, vector width, threads, rows per CTA, cluster size); the row
count is a runtime argument. `_RmsNorm(n_cols, vec)` picks the plan on the host; its keyword
arguments override it (bench/cute_variants.py times the alternatives).
"""
import torch
import cutlass
import cutlass.cute as cute
import cutlass.torch as cutlass_torch
from cutlass.cute.runtime import make_ptr

EPS = 1e-6
WARP = 32
SMEM_CACHE_BYTES = 224 * 1024  # of the 227 KB a CTA may have on Hopper (the reduction needs < 200 bytes)
SLICE_ELEMS = 16384            # long rows: a cluster CTA's slice at most this many elements (32 KB; QuACK's split)
MAX_CLUSTER = 8                # the portable cluster size on Hopper


class _RmsNorm:
    """Launch plan for one row width: chosen on the host, baked into the compiled kernel."""

    def __init__(self, n_cols: int, vec: int, group: int = 0, rows_per_cta: int = 0, cluster: int = 0,
                 reg_elems: int = 0, w_early: bool = True):
        self.n = n_cols
        self.vec = vec
        self.chunks = n_cols // vec
        # Long rows: the fewest CTAs (a power of two up to 8) whose slices fit SLICE_ELEMS each.
        if cluster <= 0:
            cluster = 1
            while cluster < MAX_CLUSTER and -(-self.chunks // cluster) * vec > SLICE_ELEMS:
                cluster *= 2
        self.cluster = cluster
        self.cpc = -(-self.chunks // cluster)            # chunks per CTA slice
        # The smallest power-of-two group of threads per row whose share fits 64 elements each
        # (a cluster CTA: 256 threads at least, so that a slice is a few chunks per thread). A group
        # under a warp (given) shares its warp with other rows and reduces over its own lanes only.
        if group <= 0:
            group = 256 if cluster > 1 else WARP
            while group < 1024 and -(-self.cpc // group) * vec > 64:
                group *= 2
        self.group = group
        self.warps = max(1, group // WARP)               # warps per row
        # Weights loaded with x (their loads in flight with the row's) rather than after the sum: on the
        # H200 (bench/cute_variants.py) 128k rows 90.6 -> 81.1 µs, 128 x 7168 7.5 -> 5.2 µs, the rest the same.
        self.w_early = w_early
        if rows_per_cta <= 0:
            rows_per_cta = 4 if group == WARP else 1     # short rows: 4 rows (one per warp) per CTA
        assert cluster == 1 or rows_per_cta == 1, "a cluster holds one row"
        assert group & (group - 1) == 0 and (group * rows_per_cta) % WARP == 0, "whole warps of power-of-two groups"
        self.rows_per_cta = rows_per_cta
        self.threads = group * rows_per_cta
        self.k_total = -(-self.cpc // group)             # chunks per thread
        # Registers for the row: 1024 threads leave 64 registers each, so hold a quarter as much there.
        if reg_elems <= 0:
            reg_elems = 64 if self.threads <= 512 else 16
        self.k_reg = max(1, min(self.k_total, reg_elems // vec))
        # Then shared memory: a row's chunk j (from k_reg on) is vec elements at j * vec.
        per_chunk = group * vec * 2 * rows_per_cta
        self.k_smem = max(0, min(self.k_total - self.k_reg, SMEM_CACHE_BYTES // per_chunk))
        self.k_hbm = self.k_reg + self.k_smem            # chunks from here on are read twice

    def describe(self) -> str:
        return (f"cluster={self.cluster} threads={self.group}x{self.rows_per_cta}{' w_early' if self.w_early else ''} "
                f"reg={self.k_reg * self.vec} smem={self.k_smem * self.vec} reread={(self.k_total - self.k_hbm) * self.vec}")

    @cute.kernel
    def kernel(self, mX: cute.Tensor, mW: cute.Tensor, mY: cute.Tensor, eps: cutlass.Float32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        n_rows = mX.shape[0]
        lane = tidx % self.group
        sub = tidx // self.group                          # the CTA's row this thread works on
        # A cluster's CTAs are consecutive block indices; CTA `rank` owns chunks [rank*cpc, (rank+1)*cpc).
        rank = bidx % self.cluster
        row = (bidx // self.cluster) * self.rows_per_cta + sub
        base = rank * self.cpc
        # A warp past the last row (several rows per CTA) recomputes the last row and stores nothing.
        src_row = cutlass.min(row, n_rows - 1)
        gX = cute.local_tile(mX, (1, self.vec), (src_row, None))   # (1, vec, chunks)
        gY = cute.local_tile(mY, (1, self.vec), (src_row, None))
        gW = cute.local_tile(mW, (self.vec,), (None,))             # (vec, chunks)

        smem = cutlass.utils.SmemAllocator()
        cached = None
        cache_base = sub * (self.k_smem * self.group)
        if cutlass.const_expr(self.k_smem > 0):
            cached = smem.allocate_tensor(mX.element_type,
                                          cute.make_layout((self.vec, self.k_smem * self.group * self.rows_per_cta)),
                                          byte_alignment=16)
        sums = None
        mbar = None
        if cutlass.const_expr(self.cluster > 1):
            # Long rows: a slot per peer CTA's partial sum and the mbarrier that counts their arrival,
            # initialised before anything else; the cluster barrier that makes the init visible to the
            # peers is split (arrive here, wait after the loads) so that it costs no time.
            sums = smem.allocate_tensor(cutlass.Float32, cute.make_layout((self.cluster,)), byte_alignment=16)
            mbar = smem.allocate_tensor(cutlass.Int64, cute.make_layout((1,)), byte_alignment=8)
            if tidx == 0:
                cute.arch.mbarrier_init(mbar.iterator, 1)
                cute.arch.mbarrier_init_fence()
            cute.arch.cluster_arrive_relaxed()
        held = cute.make_rmem_tensor((self.vec, self.k_reg), mX.element_type)
        w_held = cute.make_rmem_tensor((self.vec, self.k_reg), mW.element_type)
        acc = cutlass.Float32(0.0)
        # Every load of the row is issued before any is used (unrolled): many 16-byte loads in flight.
        for k in cutlass.range_constexpr(self.k_reg):
            j = lane + k * self.group
            c = base + j
            if j < self.cpc and c < self.chunks:
                v = gX[0, None, c].load()
                held[None, k].store(v)
                if cutlass.const_expr(self.w_early):
                    # The weights' latency (L2) hidden behind the row's loads, at the cost of registers.
                    w_held[None, k].store(gW[None, c].load())
                vf = v.to(cutlass.Float32)
                acc += (vf * vf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
        if cutlass.const_expr(self.k_smem > 0):
            for k in cutlass.range(self.k_reg, self.k_hbm, 1, unroll=4):
                j = lane + k * self.group
                c = base + j
                if j < self.cpc and c < self.chunks:
                    v = gX[0, None, c].load()
                    cached[None, cache_base + j - self.k_reg * self.group].store(v)
                    vf = v.to(cutlass.Float32)
                    acc += (vf * vf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)
        for k in cutlass.range(self.k_hbm, self.k_total, 1, unroll=4):
            j = lane + k * self.group
            c = base + j
            if j < self.cpc and c < self.chunks:
                vf = gX[0, None, c].load().to(cutlass.Float32)
                acc += (vf * vf).reduce(cute.ReductionOp.ADD, cutlass.Float32(0.0), 0)

        acc = cute.arch.warp_reduction_sum(acc, threads_in_group=min(self.group, WARP))
        if cutlass.const_expr(self.warps > 1):
            partial = smem.allocate_tensor(cutlass.Float32, cute.make_layout((self.warps * self.rows_per_cta,)),
                                           byte_alignment=16)
            if tidx % WARP == 0:
                partial[tidx // WARP] = acc
            cute.arch.sync_threads()
            acc = cutlass.Float32(0.0)
            for i in cutlass.range_constexpr(self.warps):
                acc += partial[sub * self.warps + i]
        if cutlass.const_expr(self.cluster > 1):
            # Each CTA pushes its slice's sum into slot `rank` of every peer's shared memory (st.async,
            # counted in bytes by the receiver's mbarrier), then waits on its own mbarrier for all of them.
            cute.arch.cluster_wait()   # every peer's mbarrier is initialised (its arrive was at the start)
            if tidx == 0:
                cute.arch.mbarrier_arrive_and_expect_tx(mbar.iterator, self.cluster * 4)
            if tidx < self.cluster:
                cute.arch.store_async_dsmem(sums.iterator + rank, acc.bitcast(cutlass.Int32), mbar.iterator, tidx)
            cute.arch.mbarrier_wait(mbar.iterator, 0)
            acc = cutlass.Float32(0.0)
            for r in cutlass.range_constexpr(self.cluster):
                acc += sums[r]
        rstd = cute.math.rsqrt(acc / self.n + eps)

        if row < n_rows:
            for k in cutlass.range_constexpr(self.k_reg):
                j = lane + k * self.group
                c = base + j
                if j < self.cpc and c < self.chunks:
                    w = None
                    if cutlass.const_expr(self.w_early):
                        w = w_held[None, k].load().to(cutlass.Float32)
                    else:
                        w = gW[None, c].load().to(cutlass.Float32)
                    out = held[None, k].load().to(cutlass.Float32) * rstd * w
                    gY[0, None, c].store(out.to(mY.element_type))
            if cutlass.const_expr(self.k_smem > 0):
                for k in cutlass.range(self.k_reg, self.k_hbm, 1, unroll=4):
                    j = lane + k * self.group
                    c = base + j
                    if j < self.cpc and c < self.chunks:
                        w = gW[None, c].load().to(cutlass.Float32)
                        out = cached[None, cache_base + j - self.k_reg * self.group].load().to(cutlass.Float32) * rstd * w
                        gY[0, None, c].store(out.to(mY.element_type))
            for k in cutlass.range(self.k_hbm, self.k_total, 1, unroll=4):
                j = lane + k * self.group
                c = base + j
                if j < self.cpc and c < self.chunks:
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
        grid = (cute.ceil_div(n_rows, self.rows_per_cta) * self.cluster, 1, 1)
        if cutlass.const_expr(self.cluster > 1):
            self.kernel(mX, mW, mY, eps).launch(grid=grid, block=(self.threads, 1, 1),
                                                cluster=(self.cluster, 1, 1), stream=stream)
        else:
            self.kernel(mX, mW, mY, eps).launch(grid=grid, block=(self.threads, 1, 1), stream=stream)


def _vector_width(n_cols, *tensors):
    """Elements per load: 8 bf16 (16 bytes) when the row width and every base pointer allow it."""
    for vec in (8, 4, 2):
        nbytes = vec * tensors[0].element_size()
        if n_cols % vec == 0 and all(t.data_ptr() % nbytes == 0 for t in tensors):
            return vec
    return 1


_COMPILED = {}
# Overrides of the host's launch plan (keyword arguments of _RmsNorm), empty in use:
# bench/cute_variants.py sets it to time the alternatives.
_PLAN = {}


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
    key = (cols, vec, tuple(sorted(_PLAN.items())))
    fn = _COMPILED.get(key)
    if fn is None:
        fn = cute.compile(_RmsNorm(cols, vec, **_PLAN), px, pw, py, rows, EPS, stream)
        _COMPILED[key] = fn
    fn(px, pw, py, rows, EPS, stream)
    return y

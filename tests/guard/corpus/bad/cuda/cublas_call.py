# expect: cuda-source-compute
import torch
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_bf16.h>

__global__ void softmax_kernel(const __nv_bfloat16* x, __nv_bfloat16* y, int n_cols) {
    const int row = blockIdx.x;
    const __nv_bfloat16* xr = x + (long)row * n_cols;
    __nv_bfloat16* yr = y + (long)row * n_cols;
    __shared__ float red[32];
    float m = -INFINITY;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) m = fmaxf(m, __bfloat162float(xr[c]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = red[0];
    for (int i = 1; i < blockDim.x / 32; ++i) m = fmaxf(m, red[i]);
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) s += __expf(__bfloat162float(xr[c]) - m);
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    s = 0.f;
    for (int i = 0; i < blockDim.x / 32; ++i) s += red[i];
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x)
        yr[c] = __float2bfloat16(__expf(__bfloat162float(xr[c]) - m) / s);
}

torch::Tensor softmax_fwd(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const int rows = x.size(0), cols = x.size(1);
    auto stream = at::cuda::getCurrentCUDAStream();
    softmax_kernel<<<rows, 256, 0, stream>>>(
        reinterpret_cast<const __nv_bfloat16*>(x.data_ptr()),
        reinterpret_cast<__nv_bfloat16*>(y.data_ptr()), cols);
    return y;
}

#include <cublas_v2.h>
void scale_rows(torch::Tensor y, float a) {
    cublasHandle_t h; cublasCreate(&h);
    cublasSscal(h, y.numel(), &a, reinterpret_cast<float*>(y.data_ptr()), 1);
}
"""
CPP_SRC = "torch::Tensor softmax_fwd(torch::Tensor x);"
_ext = load_inline(name="ws_softmax_blas", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC, functions=["softmax_fwd"])


def softmax(x):
    return _ext.softmax_fwd(x)

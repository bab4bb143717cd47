// The absorption around the sparse latent attention (vLLM's MLACommonImpl: q_nope · W_UK
// before, the latent output · W_UV after), on the GPU: kv_b_proj split once per layer into
// W_UK [heads, 128, 512] and W_UVᵀ [heads, 512, 128], and a plain per-head product in fp32
// on 64 × 64 tiles, rounded once to the activation dtype (as the CPU kernel rounds its
// absorbed queries and latent outputs). Its cost is a few percent of the attention's
// (2 · 128 · 512 · 2 flops per head and token against 2 · topk · 1088).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_device.cuh"

namespace attnsel::kernel::cuda::sparse_mla {
namespace {

constexpr int kTile = 64;      // rows (tokens) and columns of a CTA's block of c
constexpr int kDepth = 16;     // k per step
constexpr int kAbsorbThreads = 256;  // 16 × 16 threads, 4 × 4 outputs each

template <class T>
__global__ void __launch_bounds__(kAbsorbThreads) head_gemm_kernel(const __grid_constant__ HeadGemmParams p) {
  __shared__ float as[kDepth][kTile + 4];  // [k][token]
  __shared__ float bs[kDepth][kTile + 4];  // [k][column]
  const int head = static_cast<int>(blockIdx.z);
  const int t0 = static_cast<int>(blockIdx.x) * kTile, n0 = static_cast<int>(blockIdx.y) * kTile;
  const int tx = static_cast<int>(threadIdx.x) % 16, ty = static_cast<int>(threadIdx.x) / 16;
  const T* a = static_cast<const T*>(p.a) + std::int64_t(head) * p.a_head_stride;
  const T* b = static_cast<const T*>(p.b) + std::int64_t(head) * p.k * p.n;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < p.k; k0 += kDepth) {
    for (int i = static_cast<int>(threadIdx.x); i < kTile * kDepth; i += kAbsorbThreads) {
      const int at = i / kDepth, ak = i % kDepth;  // consecutive threads along a's k
      const int t = t0 + at, k = k0 + ak;
      as[ak][at] = t < p.tokens && k < p.k ? load_float(a, std::int64_t(t) * p.a_token_stride + k) : 0.0f;
      const int bk = i / kTile, bn = i % kTile;  // and along b's columns
      bs[bk][bn] = k0 + bk < p.k && n0 + bn < p.n ? load_float(b, std::int64_t(k0 + bk) * p.n + n0 + bn) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kDepth; ++k) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        av[i] = as[k][ty * 4 + i];
        bv[i] = bs[k][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
  T* c = static_cast<T*>(p.c) + std::int64_t(head) * p.c_head_stride;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int t = t0 + ty * 4 + i;
    if (t >= p.tokens) continue;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx * 4 + j;
      if (n < p.n) c[std::int64_t(t) * p.c_token_stride + n] = from_float<T>(acc[i][j]);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kAbsorbThreads) row_copy_kernel(const __grid_constant__ RowCopyParams p) {
  const int token = static_cast<int>(blockIdx.x);
  const T* src = static_cast<const T*>(p.src) + std::int64_t(token) * p.src_token_stride;
  T* dst = static_cast<T*>(p.dst) + std::int64_t(token) * p.dst_token_stride;
  for (int i = static_cast<int>(threadIdx.x); i < p.heads * p.cols; i += kAbsorbThreads) {
    const int h = i / p.cols, c = i % p.cols;
    dst[std::int64_t(h) * p.dst_head_stride + c] = src[std::int64_t(h) * p.src_head_stride + c];
  }
}

template <class T>
__global__ void __launch_bounds__(kAbsorbThreads) split_weights_kernel(const __grid_constant__ SplitWeightsParams p) {
  // One CTA per row of kv_b_proj: head h's nope rows go to W_UK, its v rows (transposed) to W_UVᵀ.
  const int r = static_cast<int>(blockIdx.x);
  const int per_head = p.nope + p.v;
  const int head = r / per_head, j = r % per_head;
  const T* src = static_cast<const T*>(p.kv_b_proj) + std::int64_t(r) * p.row_stride;
  T* uk = static_cast<T*>(p.w_uk);
  T* uv = static_cast<T*>(p.w_uv_t);
  for (int l = static_cast<int>(threadIdx.x); l < p.latent; l += kAbsorbThreads) {
    if (j < p.nope)
      uk[(std::int64_t(head) * p.nope + j) * p.latent + l] = src[l];
    else
      uv[(std::int64_t(head) * p.latent + l) * p.v + (j - p.nope)] = src[l];
  }
}

/// Launches kernel<bf16> or kernel<half>, as the activation dtype says.
template <class Params>
cudaError_t launch_typed(void (*bf16)(Params), void (*f16)(Params), ScalarType dtype, dim3 grid, const Params& p,
                         cudaStream_t s) {
  return launch_kernel(dtype == ScalarType::bf16 ? bf16 : f16, grid, dim3(kAbsorbThreads), 0, s, false, p);
}

}  // namespace

void launch_head_gemm(const HeadGemmParams& p, ScalarType dtype, void* stream) {
  if (p.tokens == 0) return;
  const dim3 grid(static_cast<unsigned>((p.tokens + kTile - 1) / kTile),
                  static_cast<unsigned>((p.n + kTile - 1) / kTile), static_cast<unsigned>(p.heads));
  check_cuda(launch_typed(head_gemm_kernel<__nv_bfloat16>, head_gemm_kernel<__half>, dtype, grid, p,
                          static_cast<cudaStream_t>(stream)),
             "sparse MLA absorption", cfg_string("{} tokens, {} heads, {} x {}", p.tokens, p.heads, p.k, p.n));
}

void launch_row_copy(const RowCopyParams& p, ScalarType dtype, void* stream) {
  if (p.tokens == 0) return;
  check_cuda(launch_typed(row_copy_kernel<__nv_bfloat16>, row_copy_kernel<__half>, dtype,
                          dim3(static_cast<unsigned>(p.tokens)), p, static_cast<cudaStream_t>(stream)),
             "sparse MLA query rope copy", cfg_string("{} tokens, {} heads", p.tokens, p.heads));
}

void launch_split_weights(const SplitWeightsParams& p, ScalarType dtype, void* stream) {
  const dim3 grid(static_cast<unsigned>(p.heads * (p.nope + p.v)));
  check_cuda(launch_typed(split_weights_kernel<__nv_bfloat16>, split_weights_kernel<__half>, dtype, grid, p,
                          static_cast<cudaStream_t>(stream)),
             "sparse MLA weight split", cfg_string("{} heads", p.heads));
}

}  // namespace attnsel::kernel::cuda::sparse_mla

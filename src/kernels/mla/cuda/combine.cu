// The combine step of the MLA decode: merges the pieces of each split request by their
// log-sum-exp (FlashMLA's csrc/smxx/decode/combine, the same math in attnsel's terms).
//
// One warp per query row of a split request: it reads the pieces' log2-sum-exps, M = their
// maximum, weights w_k = exp2(lse_k − M) / Σ w, then O = Σ w_k·O_k (a piece with weight 0 is
// never read, so its partial may hold anything), the log-sum-exp M + log2 Σ w in natural
// log units. A row whose pieces all saw no key gets output 0 and LSE −inf. Requests with one
// piece were written by the decode kernel; their warps return at once.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/device_ops.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/mla/cuda/launch.hpp"

namespace attnsel::kernel::cuda::mla {
namespace {

constexpr int kRowsPerBlock = 8;
constexpr int kMaxSplits = 256;  ///< pieces of one request (the planner checks: at most the parts)

template <class T>
__global__ void __launch_bounds__(32 * kRowsPerBlock) combine_kernel(const __grid_constant__ DecodeParams p) {
  __shared__ float weights[kRowsPerBlock][kMaxSplits];
  wait_for_prior_grids();  // the pieces come from the decode kernel
  const DecodeRequest r = p.requests[blockIdx.x];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int row = static_cast<int>(blockIdx.y) * kRowsPerBlock + warp;
  if (r.num_splits <= 1 || row >= r.q_len * p.num_heads) return;
  const int n = r.num_splits;
  const float* lse = p.part_lse + std::int64_t(r.split_begin) * p.max_rows + row;
  float m = -INFINITY;
  for (int k = lane; k < n; k += 32) m = fmaxf(m, lse[std::int64_t(k) * p.max_rows]);
#pragma unroll
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  float sum = 0.0f;
  for (int k = lane; k < n; k += 32) {
    const float w = m == -INFINITY ? 0.0f : fast_exp2(lse[std::int64_t(k) * p.max_rows] - m);
    weights[warp][k] = w;
    sum += w;
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  __syncwarp();
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  // 512 values a row: four float4 a lane.
  float4 acc[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int k = 0; k < n; ++k) {
    const float w = weights[warp][k] * inv;
    if (w == 0.0f) continue;
    const float4* src = reinterpret_cast<const float4*>(
        p.part_o + (std::int64_t(r.split_begin + k) * p.max_rows + row) * kValueDim);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 v = src[lane + 32 * i];
      acc[i].x += w * v.x;
      acc[i].y += w * v.y;
      acc[i].z += w * v.z;
      acc[i].w += w * v.w;
    }
  }
  T* out = static_cast<T*>(p.out) + (std::int64_t(r.q_begin) * p.num_heads + row) * p.out_row_stride;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint2 packed = make_uint2(pack2<T>(acc[i].x, acc[i].y), pack2<T>(acc[i].z, acc[i].w));
    *reinterpret_cast<uint2*>(out + 4 * (lane + 32 * i)) = packed;
  }
  if (p.lse && lane == 0)
    p.lse[std::int64_t(r.q_begin) * p.num_heads + row] = sum > 0.0f ? (m + __log2f(sum)) * 0.6931471805599453f
                                                                     : -INFINITY;
}

}  // namespace

void launch_combine(const DecodeParams& p, ScalarType e, bool programmatic, void* stream) {
  const dim3 grid(p.num_requests, (p.max_rows + kRowsPerBlock - 1) / kRowsPerBlock), block(32 * kRowsPerBlock);
  auto cfg = [&] { return cfg_string("MLA combine: {} requests x {} rows", p.num_requests, p.max_rows); };
  const auto s = static_cast<cudaStream_t>(stream);
  if (e == ScalarType::bf16)
    check_cuda(launch_kernel(combine_kernel<__nv_bfloat16>, grid, block, 0, s, programmatic, p), "MLA combine", cfg());
  else
    check_cuda(launch_kernel(combine_kernel<__half>, grid, block, 0, s, programmatic, p), "MLA combine", cfg());
}

}  // namespace attnsel::kernel::cuda::mla

// The lightning indexer's scores on the GPU (DeepGEMM's fp8_mqa_logits and
// fp8_paged_mqa_logits, as vLLM's sparse_attn_indexer calls them), plainly with mma.sync:
//   * each query head is quantised to e4m3 with a power-of-two scale σ (vLLM's
//     fused_indexer_q_rope_quant), σ folded into its weight w' = w · σ · 128^-0.5 · H^-0.5;
//   * I[t, s] = κ_s · Σ_h w'[t, h] · ReLU(q8[t, h] · k8[s]) for the positions s the token
//     sees (the e4m3 values are exact in bf16, so the products are exact and only the fp32
//     sums round), −inf after them.
// One CTA per query token and 64 positions: the token's quantised heads and the 64 keys
// (widened from the paged fp8 cache; a position the token does not see is never read) in
// shared memory, each warp a 16-head tile's products, ReLU'd, weighted and summed over its
// heads in registers, the warps' sums added in a fixed order.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/fp8_convert.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_device.cuh"

namespace attnsel::kernel::cuda::sparse_mla {
namespace {

constexpr int kPositions = 64;  // positions per CTA
constexpr int kScoreThreads = 128;
constexpr int kScoreWarps = kScoreThreads / 32;
constexpr int kScoreRowStride = kIndexerDim + 8;  // padded shared-memory rows (elements)
constexpr int kMaxHeads = 128;

// ---- the queries ----------------------------------------------------------------------

template <class T, class W>
__global__ void __launch_bounds__(256) query_quant_kernel(const __grid_constant__ QueryQuantParams p) {
  const std::int64_t row = std::int64_t(blockIdx.x) * 8 + threadIdx.x / 32;  // (token, head)
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (row >= std::int64_t(p.tokens) * p.heads) return;
  const int token = static_cast<int>(row / p.heads), head = static_cast<int>(row % p.heads);
  const T* q =
      static_cast<const T*>(p.q) + std::int64_t(token) * p.q_token_stride + std::int64_t(head) * p.q_head_stride;
  float x[4];
  const float amax = load_row_quad(q, lane, x);
  const float sigma = pow2_ceil(fmaxf(amax, 1e-10f) / kE4m3Max);
  std::uint16_t* q8 = p.q8 + row * kIndexerDim + 4 * lane;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat16 v = __float2bfloat16_rn(from_e4m3(to_e4m3(__fdiv_rn(x[i], sigma))));  // exact
    q8[i] = __bfloat16_as_ushort(v);
  }
  if (lane == 0) {
    const float w = load_float(static_cast<const W*>(p.weights), std::int64_t(token) * p.weights_stride + head);
    p.w_eff[row] = w * sigma * p.weight_scale;
  }
}

// ---- the scores -----------------------------------------------------------------------

constexpr int smem_bytes(int padded_heads) {
  return (padded_heads + kPositions) * kScoreRowStride * 2 + (padded_heads + kPositions + kScoreWarps * kPositions) * 4;
}

__global__ void __launch_bounds__(kScoreThreads) scores_kernel(const __grid_constant__ ScoreParams p) {
  extern __shared__ __align__(16) std::uint8_t smem[];
  const int padded_heads = (p.heads + 15) / 16 * 16;
  auto* qs = reinterpret_cast<__nv_bfloat16*>(smem);
  auto* ks = qs + padded_heads * kScoreRowStride;
  auto* weights = reinterpret_cast<float*>(ks + kPositions * kScoreRowStride);
  float* kappa = weights + padded_heads;
  float* partial = kappa + kPositions;  // [kScoreWarps][kPositions]

  const int t = static_cast<int>(blockIdx.x);  // row of this wave
  const int token = p.token_begin + t;
  const std::int64_t s0 = std::int64_t(blockIdx.y) * kPositions;
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const std::int64_t len = p.row_len[token];
  float* out = p.logits + std::int64_t(t) * p.logits_stride;
  if (s0 >= len) {  // nothing this token sees: −inf up to the width
    for (std::int64_t s = s0 + tid; s < min(s0 + kPositions, p.width); s += kScoreThreads) out[s] = -INFINITY;
    return;
  }

  // The token's quantised heads (rows past the layer's heads are zeros) and their weights.
  const std::uint16_t* q8 = p.q8 + std::int64_t(t) * p.heads * kIndexerDim;
  constexpr int kUnits = kIndexerDim / 8;
  for (int i = tid; i < padded_heads * kUnits; i += kScoreThreads) {
    const int h = i / kUnits, c = i % kUnits;
    const bool valid = h < p.heads;
    cp_async16(smem_addr(qs + h * kScoreRowStride + c * 8), valid ? q8 + h * kIndexerDim + c * 8 : q8, valid);
  }
  cp_async_commit();
  for (int h = tid; h < padded_heads; h += kScoreThreads)
    weights[h] = h < p.heads ? p.w_eff[std::int64_t(t) * p.heads + h] : 0.0f;

  // The keys of positions [s0, s0 + 64) the token sees, widened to bf16 (exact), and their
  // scales; the others are zeros with scale 0.
  const int seq = p.token_seq[token];
  const std::int32_t* table = p.block_table + std::int64_t(seq) * p.table_stride;
  for (int i = tid; i < kPositions * kUnits; i += kScoreThreads) {
    const int r = i / kUnits, c = i % kUnits;
    const std::int64_t s = s0 + r;
    uint4 wide = make_uint4(0u, 0u, 0u, 0u);
    if (s < len) {
      const std::uint8_t* block = p.cache + std::int64_t(table[s / p.block_size]) * p.block_stride;
      // 4-byte loads: a block of an odd block size starts 4-byte aligned only.
      const auto* raw = reinterpret_cast<const std::uint32_t*>(block + (s % p.block_size) * kIndexerDim + c * 8);
      wide = e4m3x8_to<__nv_bfloat16>(make_uint2(raw[0], raw[1]));
    }
    *reinterpret_cast<uint4*>(ks + r * kScoreRowStride + c * 8) = wide;
  }
  for (int r = tid; r < kPositions; r += kScoreThreads) {
    const std::int64_t s = s0 + r;
    float scale = 0.0f;
    if (s < len) {
      const std::uint8_t* block = p.cache + std::int64_t(table[s / p.block_size]) * p.block_stride;
      scale =
          *reinterpret_cast<const float*>(block + std::int64_t(p.block_size) * kIndexerDim + (s % p.block_size) * 4);
    }
    kappa[r] = scale;
  }
  cp_async_wait<0>();
  __syncthreads();

  // Warp w: head tiles w, w + 4, …; per key column, Σ over its heads of w' · ReLU(q8 · k8).
  float colsum[kPositions / 8][2] = {};
  const std::uint32_t qbase = smem_addr(qs), kbase = smem_addr(ks);
  for (int tile = warp; tile < padded_heads / 16; tile += kScoreWarps) {
    float acc[kPositions / 8][4] = {};
    const int q_row = tile * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
    for (int kk = 0; kk < kIndexerDim / 16; ++kk) {
      std::uint32_t a[4];
      ldmatrix_x4(a, qbase + (q_row * kScoreRowStride + (2 * kk + lane / 16) * 8) * 2);
#pragma unroll
      for (int n2 = 0; n2 < kPositions / 16; ++n2) {
        std::uint32_t b[4];
        const int key = n2 * 16 + (lane % 8) + (lane / 16) * 8;
        ldmatrix_x4(b, kbase + (key * kScoreRowStride + (2 * kk + (lane / 8) % 2) * 8) * 2);
        mma16816<__nv_bfloat16>(acc[2 * n2], a, b[0], b[1]);
        mma16816<__nv_bfloat16>(acc[2 * n2 + 1], a, b[2], b[3]);
      }
    }
    const float w0 = weights[tile * 16 + lane / 4], w1 = weights[tile * 16 + lane / 4 + 8];
#pragma unroll
    for (int n = 0; n < kPositions / 8; ++n) {
      colsum[n][0] += w0 * fmaxf(acc[n][0], 0.0f) + w1 * fmaxf(acc[n][2], 0.0f);
      colsum[n][1] += w0 * fmaxf(acc[n][1], 0.0f) + w1 * fmaxf(acc[n][3], 0.0f);
    }
  }
  // Lanes with the same lane % 4 hold the same columns: add over the eight head rows.
#pragma unroll
  for (int n = 0; n < kPositions / 8; ++n)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      float v = colsum[n][e];
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      if (lane < 4) partial[warp * kPositions + n * 8 + 2 * lane + e] = v;
    }
  __syncthreads();
  for (int r = tid; r < kPositions; r += kScoreThreads) {
    const std::int64_t s = s0 + r;
    if (s >= p.width) continue;
    float sum = 0.0f;
#pragma unroll
    for (int w = 0; w < kScoreWarps; ++w) sum += partial[w * kPositions + r];
    out[s] = s < len ? kappa[r] * sum : -INFINITY;
  }
}

}  // namespace

void launch_query_quant(const QueryQuantParams& p, ScalarType dtype, void* stream) {
  if (p.tokens == 0) return;
  const std::int64_t rows = std::int64_t(p.tokens) * p.heads;
  const dim3 grid(static_cast<unsigned>((rows + 7) / 8)), block(256);
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err;
  if (dtype == ScalarType::bf16)
    err = p.weights_f32 ? launch_kernel(query_quant_kernel<__nv_bfloat16, float>, grid, block, 0, s, false, p)
                        : launch_kernel(query_quant_kernel<__nv_bfloat16, __nv_bfloat16>, grid, block, 0, s, false, p);
  else if (dtype == ScalarType::f16)
    err = p.weights_f32 ? launch_kernel(query_quant_kernel<__half, float>, grid, block, 0, s, false, p)
                        : launch_kernel(query_quant_kernel<__half, __half>, grid, block, 0, s, false, p);
  else
    err = launch_kernel(query_quant_kernel<float, float>, grid, block, 0, s, false, p);
  check_cuda(err, "indexer query quantisation", cfg_string("{} tokens, {} heads", p.tokens, p.heads));
}

void launch_scores(const ScoreParams& p, void* stream) {
  if (p.tokens == 0 || p.width == 0) return;
  static std::atomic<std::uint64_t> smem_set{0};
  const int bytes = smem_bytes((p.heads + 15) / 16 * 16);
  auto cfg = [&] { return cfg_string("indexer scores: {} tokens, {} heads, width {}", p.tokens, p.heads, p.width); };
  set_max_smem_once(smem_set, scores_kernel, smem_bytes(kMaxHeads), "indexer scores", cfg);
  const dim3 grid(static_cast<unsigned>(p.tokens), static_cast<unsigned>((p.width + kPositions - 1) / kPositions));
  check_cuda(
      launch_kernel(scores_kernel, grid, dim3(kScoreThreads), bytes, static_cast<cudaStream_t>(stream), false, p),
      "indexer scores", cfg());
}

}  // namespace attnsel::kernel::cuda::sparse_mla

// The sparse latent attention on the GPU: FlashMLA's sparse decode (csrc/sm90/decode/
// sparse_fp8) computed plainly with mma.sync. One CTA per query token, group of 16 heads
// and piece of the index row; per chunk of 64 index entries it gathers the cache rows into
// shared memory (cp.async for a 16-bit cache; an fp8_ds_mla row is dequantised on the way
// as FlashMLA reads it, bf16(e4m3 · tile scale)), then S = Q·Kᵀ (each warp 16 keys), the
// online softmax (8 threads per head), O += P·V (each warp 128 of the 512 value columns).
// An index outside the cache contributes nothing and its row is never read (zeros enter
// the products, so no stale NaN reaches them). A token whose row has no valid entry writes
// output 0 and LSE −inf. With several pieces, each writes its normalised output and LSE,
// and the combine merges them (FlashMLA's combine, exact in fp32).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <atomic>
#include <cmath>

#include "kernels/device/cuda/cuda_check.cuh"
#include "kernels/device/cuda/device_ops.cuh"
#include "kernels/device/cuda/programmatic_launch.cuh"
#include "kernels/sparse_mla/cuda/launch.hpp"
#include "kernels/sparse_mla/cuda/sparse_device.cuh"

namespace attnsel::kernel::cuda::sparse_mla {
namespace {

constexpr int kAttendThreads = 128;
constexpr int kAttendWarps = kAttendThreads / 32;
constexpr float kLn2 = 0.6931471805599453f;
// Shared-memory rows are padded by 16 bytes, so ldmatrix's eight row reads hit eight bank groups.
constexpr int kAttendRowStride = kLatentDim + 8;                  // queries and gathered rows, elements
constexpr int kPStride = kKeyChunk + 8;                     // probabilities, elements
constexpr int kSStride = kKeyChunk + 4;                     // scores, floats
constexpr int kUnits = kLatentDim / 8;                      // 16-byte units of a 576-wide row
constexpr int kValueUnitsPerWarp = kValueDim / kAttendWarps / 8;  // 16 units = 128 columns

constexpr int kQBytes = kHeadGroup * kAttendRowStride * 2;
constexpr int kKBytes = kKeyChunk * kAttendRowStride * 2;
constexpr int kSBytes = kHeadGroup * kSStride * 4;
constexpr int kPBytes = kHeadGroup * kPStride * 2;
constexpr int kRowsBytes = kKeyChunk * 4;
constexpr int kSmemBytes = kQBytes + kKBytes + kSBytes + kPBytes + kRowsBytes + 3 * kHeadGroup * 4;
static_assert(kQBytes % 16 == 0 && kKBytes % 16 == 0 && kSBytes % 16 == 0 && kPBytes % 16 == 0);
static_assert(kAttendWarps * 16 == kKeyChunk, "S = Q·Kᵀ gives each warp 16 keys of a chunk");
static_assert(kHeadGroup * 8 == kAttendThreads, "the softmax gives each head row 8 threads");

/// Eight e4m3 bytes times `scale`, each product rounded to bf16 (FlashMLA's dequantisation).
__device__ __forceinline__ uint4 dequant8_bf16(uint2 raw, float scale) {
  std::uint32_t w[4];
  const std::uint32_t bytes[2] = {raw.x, raw.y};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const std::uint32_t word = bytes[i / 2] >> (16 * (i % 2));
    const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word & 0xFFFFu), __NV_E4M3);
    const float2 f = __half22float2(__half2(h));
    w[i] = pack2<__nv_bfloat16>(f.x * scale, f.y * scale);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

template <class T, bool DS_MLA>
__global__ void __launch_bounds__(kAttendThreads) latent_attend_kernel(const __grid_constant__ LatentAttendParams p) {
  extern __shared__ __align__(16) std::uint8_t smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = reinterpret_cast<T*>(smem + kQBytes);
  float* ss = reinterpret_cast<float*>(smem + kQBytes + kKBytes);
  T* ps = reinterpret_cast<T*>(smem + kQBytes + kKBytes + kSBytes);
  int* rows = reinterpret_cast<int*>(smem + kQBytes + kKBytes + kSBytes + kPBytes);
  float* row_m = reinterpret_cast<float*>(smem + kQBytes + kKBytes + kSBytes + kPBytes + kRowsBytes);
  float* row_l = row_m + kHeadGroup;
  float* row_alpha = row_l + kHeadGroup;

  const int token = static_cast<int>(blockIdx.x);
  const int head0 = static_cast<int>(blockIdx.y) * kHeadGroup;
  const int split = static_cast<int>(blockIdx.z);
  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int key_begin = split * p.keys_per_split;
  const int key_end = min(p.topk, key_begin + p.keys_per_split);

  // The group's queries; heads past the layer's are zeros (their rows are never stored).
  const T* q = static_cast<const T*>(p.q) + std::int64_t(token) * p.q_token_stride;
  for (int i = tid; i < kHeadGroup * kUnits; i += kAttendThreads) {
    const int r = i / kUnits, c = i % kUnits;
    const bool valid = head0 + r < p.heads;
    const T* src = valid ? q + std::int64_t(head0 + r) * p.q_head_stride + c * 8 : q;
    cp_async16(smem_addr(qs + r * kAttendRowStride + c * 8), src, valid);
  }
  cp_async_commit();
  if (tid < kHeadGroup) {
    row_m[tid] = -INFINITY;
    row_l[tid] = 0.0f;
  }
  float o[kValueUnitsPerWarp][4];  // the warp's 16 n8 tiles of value columns
#pragma unroll
  for (int n = 0; n < kValueUnitsPerWarp; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  const std::int32_t* index_row = p.indices + std::int64_t(token) * p.indices_stride;
  for (int k0 = key_begin; k0 < key_end; k0 += kKeyChunk) {
    // This chunk's cache rows (−1: none). The barrier also orders the last chunk's reads of
    // the tiles before this chunk's writes.
    bool any = false;
    if (tid < kKeyChunk) {
      int row = -1;
      if (k0 + tid < key_end) {
        const std::int32_t idx = index_row[k0 + tid];
        if (idx >= 0 && idx < p.cache_rows) row = idx;
      }
      rows[tid] = row;
      any = row >= 0;
    }
    if (!__syncthreads_or(any)) continue;

    // Gather the rows; a row without an index is zeros.
    if constexpr (!DS_MLA) {
      const T* cache = static_cast<const T*>(p.cache);
      for (int i = tid; i < kKeyChunk * kUnits; i += kAttendThreads) {
        const int r = i / kUnits, c = i % kUnits;
        const int row = rows[r];
        const T* src = row >= 0 ? cache + std::int64_t(row) * p.cache_row_stride + c * 8 : cache;
        cp_async16(smem_addr(ks + r * kAttendRowStride + c * 8), src, row >= 0);
      }
      cp_async_commit();
    } else {
      const auto* cache = static_cast<const std::uint8_t*>(p.cache);
      constexpr int kLatentUnits = kValueDim / 8;
      for (int i = tid; i < kKeyChunk * kLatentUnits; i += kAttendThreads) {
        const int r = i / kLatentUnits, c = i % kLatentUnits;
        const int row = rows[r];
        uint4 wide = make_uint4(0u, 0u, 0u, 0u);
        if (row >= 0) {
          const std::uint8_t* rec = cache + std::int64_t(row) * p.cache_row_stride;
          const uint2 raw = *reinterpret_cast<const uint2*>(rec + c * 8);
          const float scale = *reinterpret_cast<const float*>(rec + kDsScaleOffset + 4 * (c * 8 / kDsTile));
          wide = dequant8_bf16(raw, scale);
        }
        *reinterpret_cast<uint4*>(ks + r * kAttendRowStride + c * 8) = wide;
      }
      constexpr int kRopeUnits = kRopeDim / 8;
      for (int i = tid; i < kKeyChunk * kRopeUnits; i += kAttendThreads) {
        const int r = i / kRopeUnits, c = i % kRopeUnits;
        const int row = rows[r];
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (row >= 0)
          v = *reinterpret_cast<const uint4*>(cache + std::int64_t(row) * p.cache_row_stride + kDsRopeOffset + c * 16);
        *reinterpret_cast<uint4*>(ks + r * kAttendRowStride + kValueDim + c * 8) = v;
      }
    }
    cp_async_wait<0>();  // the rows, and the queries before the first chunk
    __syncthreads();

    // S = Q·Kᵀ: warp w scores keys [16w, 16w + 16) over the 576 columns.
    {
      float s[2][4] = {};
      const std::uint32_t qbase = smem_addr(qs), kbase = smem_addr(ks);
      const int q_row = (lane % 8) + ((lane / 8) % 2) * 8;
      const int key = warp * 16 + (lane % 8) + (lane / 16) * 8;
#pragma unroll 4
      for (int kk = 0; kk < kLatentDim / 16; ++kk) {
        std::uint32_t a[4], b[4];
        ldmatrix_x4(a, qbase + (q_row * kAttendRowStride + (2 * kk + lane / 16) * 8) * 2);
        ldmatrix_x4(b, kbase + (key * kAttendRowStride + (2 * kk + (lane / 8) % 2) * 8) * 2);
        mma16816<T>(s[0], a, b[0], b[1]);
        mma16816<T>(s[1], a, b[2], b[3]);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int head = lane / 4 + (e / 2) * 8;
          const int col = warp * 16 + nt * 8 + 2 * (lane % 4) + (e & 1);
          ss[head * kSStride + col] = rows[col] >= 0 ? s[nt][e] * p.scale_log2 : -INFINITY;
        }
    }
    __syncthreads();

    // Online softmax: head row tid / 8, keys 8 · (tid % 8) … + 7.
    {
      const int head = tid / 8, part = tid % 8;
      float sv[8];
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        sv[j] = ss[head * kSStride + part * 8 + j];
        mx = fmaxf(mx, sv[j]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const float m_old = row_m[head];
      const float m_new = fmaxf(m_old, mx);
      // A row with no key yet keeps m = −inf; 0 as the reference avoids inf − inf.
      const float ref = m_new == -INFINITY ? 0.0f : m_new;
      float sum = 0.0f;
      std::uint32_t packed[4];
#pragma unroll
      for (int j = 0; j < 8; j += 2) {
        const float p0 = exp2f(sv[j] - ref), p1 = exp2f(sv[j + 1] - ref);
        sum += p0 + p1;
        packed[j / 2] = pack2<T>(p0, p1);
      }
      *reinterpret_cast<uint4*>(ps + head * kPStride + part * 8) =
          make_uint4(packed[0], packed[1], packed[2], packed[3]);
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      if (part == 0) {  // the shuffles above ordered every lane's read of row_m before this write
        const float alpha = exp2f(m_old - ref);
        row_alpha[head] = alpha;
        row_l[head] = row_l[head] * alpha + sum;
        row_m[head] = m_new;
      }
    }
    __syncthreads();

    // O = O · alpha + P·V: warp w owns value columns [128w, 128w + 128).
    {
      const float a0 = row_alpha[lane / 4], a1 = row_alpha[lane / 4 + 8];
#pragma unroll
      for (int n = 0; n < kValueUnitsPerWarp; ++n) {
        o[n][0] *= a0;
        o[n][1] *= a0;
        o[n][2] *= a1;
        o[n][3] *= a1;
      }
      const std::uint32_t pbase = smem_addr(ps), kbase = smem_addr(ks);
      const int p_row = (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
      for (int kb = 0; kb < kKeyChunk / 16; ++kb) {
        std::uint32_t a[4];
        ldmatrix_x4(a, pbase + (p_row * kPStride + (2 * kb + lane / 16) * 8) * 2);
        const int key = kb * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
#pragma unroll
        for (int j = 0; j < kValueUnitsPerWarp / 2; ++j) {
          std::uint32_t v[4];
          const int unit = warp * kValueUnitsPerWarp + 2 * j + lane / 16;
          ldmatrix_x4_trans(v, kbase + (key * kAttendRowStride + unit * 8) * 2);
          mma16816<T>(o[2 * j], a, v[0], v[1]);
          mma16816<T>(o[2 * j + 1], a, v[2], v[3]);
        }
      }
    }
  }
  cp_async_wait<0>();  // a CTA whose chunks were all empty still waits for its query copies
  __syncthreads();     // the last chunk's row_l / row_m

  // This thread's rows: heads lane/4 and lane/4 + 8 of the group.
  float inv[2], lse[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = row_l[lane / 4 + 8 * h];
    inv[h] = l > 0.0f ? 1.0f / l : 0.0f;
    lse[h] = l > 0.0f ? (row_m[lane / 4 + 8 * h] + log2f(l)) * kLn2 : -INFINITY;
  }
  if (p.splits == 1) {
    T* out = static_cast<T*>(p.out) + std::int64_t(token) * p.out_token_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int head = head0 + lane / 4 + 8 * h;
      if (head >= p.heads) continue;
      T* row = out + std::int64_t(head) * p.out_head_stride;
#pragma unroll
      for (int n = 0; n < kValueUnitsPerWarp; ++n) {
        const int col = warp * (kValueDim / kAttendWarps) + n * 8 + 2 * (lane % 4);
        *reinterpret_cast<std::uint32_t*>(row + col) = pack2<T>(o[n][2 * h] * inv[h], o[n][2 * h + 1] * inv[h]);
      }
      if (p.lse && lane % 4 == 0 && warp == 0) p.lse[std::int64_t(token) * p.lse_token_stride + head] = lse[h];
    }
  } else {
    const std::int64_t slot = std::int64_t(split) * p.tokens + token;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int head = head0 + lane / 4 + 8 * h;
      if (head >= p.heads) continue;
      float* row = p.part_o + (slot * p.heads + head) * kValueDim;
#pragma unroll
      for (int n = 0; n < kValueUnitsPerWarp; ++n) {
        const int col = warp * (kValueDim / kAttendWarps) + n * 8 + 2 * (lane % 4);
        *reinterpret_cast<float2*>(row + col) = make_float2(o[n][2 * h] * inv[h], o[n][2 * h + 1] * inv[h]);
      }
      if (lane % 4 == 0 && warp == 0) p.part_lse[slot * p.heads + head] = lse[h];
    }
  }
}

/// One CTA per (token, head): out = Σ w_s · o_s / Σ w_s with w_s = exp(lse_s − max lse);
/// every piece empty → 0 and −inf.
template <class T>
__global__ void __launch_bounds__(kAttendThreads) latent_combine_kernel(const __grid_constant__ LatentAttendParams p) {
  const int token = static_cast<int>(blockIdx.x), head = static_cast<int>(blockIdx.y);
  const std::int64_t stride = std::int64_t(p.tokens) * p.heads;
  const std::int64_t row = std::int64_t(token) * p.heads + head;
  float mx = -INFINITY;
  for (int s = 0; s < p.splits; ++s) mx = fmaxf(mx, p.part_lse[s * stride + row]);
  float sum = 0.0f, acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int col = 4 * static_cast<int>(threadIdx.x);
  if (mx != -INFINITY) {
    for (int s = 0; s < p.splits; ++s) {
      const float w = expf(p.part_lse[s * stride + row] - mx);
      sum += w;
      const float4 v = *reinterpret_cast<const float4*>(p.part_o + (s * stride + row) * kValueDim + col);
      acc[0] += w * v.x;
      acc[1] += w * v.y;
      acc[2] += w * v.z;
      acc[3] += w * v.w;
    }
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  T* out =
      static_cast<T*>(p.out) + std::int64_t(token) * p.out_token_stride + std::int64_t(head) * p.out_head_stride + col;
  *reinterpret_cast<std::uint32_t*>(out) = pack2<T>(acc[0] * inv, acc[1] * inv);
  *reinterpret_cast<std::uint32_t*>(out + 2) = pack2<T>(acc[2] * inv, acc[3] * inv);
  if (p.lse && threadIdx.x == 0)
    p.lse[std::int64_t(token) * p.lse_token_stride + head] = sum > 0.0f ? mx + logf(sum) : -INFINITY;
}
static_assert(kAttendThreads * 4 == kValueDim, "the combine gives each thread four value columns");

template <class T, bool DS_MLA>
void launch_attend(const LatentAttendParams& p, cudaStream_t s) {
  static std::atomic<std::uint64_t> smem_set{0};
  auto cfg = [&] {
    return cfg_string("sparse MLA latent attention: {} tokens, {} heads, topk {}, {} pieces", p.tokens, p.heads, p.topk,
                      p.splits);
  };
  set_max_smem_once(smem_set, latent_attend_kernel<T, DS_MLA>, kSmemBytes, "sparse MLA latent attention", cfg);
  const dim3 grid(static_cast<unsigned>(p.tokens), static_cast<unsigned>((p.heads + kHeadGroup - 1) / kHeadGroup),
                  static_cast<unsigned>(p.splits));
  check_cuda(launch_kernel(latent_attend_kernel<T, DS_MLA>, grid, dim3(kAttendThreads), kSmemBytes, s, false, p),
             "sparse MLA latent attention", cfg());
}

}  // namespace

void launch_latent_attend(const LatentAttendParams& p, ScalarType dtype, LatentCache cache, void* stream) {
  if (p.tokens == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (cache == LatentCache::ds_mla)
    launch_attend<__nv_bfloat16, true>(p, s);
  else if (dtype == ScalarType::bf16)
    launch_attend<__nv_bfloat16, false>(p, s);
  else
    launch_attend<__half, false>(p, s);
}

void launch_latent_combine(const LatentAttendParams& p, ScalarType dtype, void* stream) {
  if (p.tokens == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(p.tokens), static_cast<unsigned>(p.heads));
  auto cfg = [&] {
    return cfg_string("sparse MLA combine: {} tokens, {} heads, {} pieces", p.tokens, p.heads, p.splits);
  };
  const cudaError_t err =
      dtype == ScalarType::bf16
          ? launch_kernel(latent_combine_kernel<__nv_bfloat16>, grid, dim3(kAttendThreads), 0, s, false, p)
          : launch_kernel(latent_combine_kernel<__half>, grid, dim3(kAttendThreads), 0, s, false, p);
  check_cuda(err, "sparse MLA combine", cfg());
}

}  // namespace attnsel::kernel::cuda::sparse_mla

// Internal: the paged-cache store of new keys and values, shared by the cache writer and the
// decode kernel's fused append so that both write the same bytes at the same addresses.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/device/cuda/fp8_convert.cuh"

namespace attnsel::kernel::cuda {

/// Stores one 16-byte chunk (8 elements from column c) of KV head h's key `k` and value `v`
/// into row `off` of cache block `page` (an fp8 cache quantised with the head's inverse
/// scale). P is CacheWriteParams or AttnParams: their cache strides and inverse scales
/// share names.
template <class T, bool FP8, class P>
__device__ __forceinline__ void store_kv_chunk(const P& p, void* k_cache, void* v_cache, std::int64_t page, int off,
                                               int h, int c, uint4 k, uint4 v) {
  using Stored = std::conditional_t<FP8, std::uint8_t, T>;
  Stored* kd = static_cast<Stored*>(k_cache) + page * p.k_stride_block + off * p.k_stride_tok + h * p.k_stride_head + c;
  Stored* vd = static_cast<Stored*>(v_cache) + page * p.v_stride_block + off * p.v_stride_tok + h * p.v_stride_head + c;
  store8_to_cache<T, FP8>(kd, k, p.k_inv_scales ? p.k_inv_scales[h] : p.k_inv_scale);
  store8_to_cache<T, FP8>(vd, v, p.v_inv_scales ? p.v_inv_scales[h] : p.v_inv_scale);
}

}  // namespace attnsel::kernel::cuda

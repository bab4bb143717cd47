// The shape of a synthetic workload's attention layers: heads, head size, the activation
// and KV-cache dtypes with the cache's fp8 scales, and the paged cache's block size and
// physical layout. One struct for every job that builds such layers: a batch
// (WorkloadSpec), `attnsel run` (RunSpec), `attnsel bench` (its cases' workloads) and the
// DCP job (distributed::DcpJobSpec) are each a shape plus what their job adds, and the
// command's workload options fill one.
// Thread-safety: a plain value.
#pragma once

#include <cstdint>
#include <vector>

#include "attnsel/cache_dtype.hpp"
#include "attnsel/scalar_type.hpp"

namespace attnsel::runtime {

/// Physical order of one block of the cache (vLLM's KVCacheLayout: NHD = LBNHC, HND = LBHNC).
enum class CacheLayout : std::uint8_t { nhd, hnd };

struct WorkloadShape {
  int num_heads = 32;
  int num_kv_heads = 8;
  int head_size = 128;
  kernel::ScalarType dtype = kernel::ScalarType::bf16;  ///< queries, outputs, new keys/values
  CacheDType kv_cache_dtype = CacheDType::auto_;
  float k_scale = 1.0f;          ///< fp8 caches: dequantisation scales (the layer's k_scale/v_scale)
  float v_scale = 1.0f;
  std::vector<float> k_scales;   ///< fp8 caches: per-KV-head scales (empty = k_scale/v_scale for every head)
  std::vector<float> v_scales;
  int block_size = 16;
  CacheLayout layout = CacheLayout::nhd;

  /// The shape part of a spec that extends it, to copy or compare as a whole.
  WorkloadShape& shape() { return *this; }
  const WorkloadShape& shape() const { return *this; }
};

}  // namespace attnsel::runtime

// GPU tests run where the CUDA kernels can run and skip, saying why, everywhere else; the
// GQA workload several of them run.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/output_error.hpp"
#include "kernels/attention/reference.hpp"
#include "runtime/paged_workload.hpp"

namespace attnsel::kernel::cuda::testing {

inline bool gpu_available() { return cuda_kernels_built() && cuda_kernels_unavailable_reason().empty(); }

/// The sparse MLA CUDA kernels run on compute capability 8.x and 9.x only.
inline bool sparse_mla_gpu_available() {
  if (!gpu_available()) return false;
  const int major = device_info(0).major;
  return major == 8 || major == 9;
}

/// The device output `out` of every token of `md` against the reference for `query` over
/// `cache` (both on the host).
inline kernel::testing::OutputError device_output_error(const LayerParams& lp, const TensorView& query,
                                                        const KVCacheView& cache, const AttentionMetadata& md,
                                                        const DeviceTensor& out) {
  std::vector<std::int32_t> tokens(static_cast<std::size_t>(md.num_actual_tokens));
  std::iota(tokens.begin(), tokens.end(), 0);
  const std::vector<double> ref = reference::attend(lp, query, cache, md, tokens);
  std::vector<std::uint8_t> host(span_bytes(out.view));
  out.buffer.download(host.data(), host.size());
  return kernel::testing::output_error(host.data(), out.view.dtype, ref);
}

/// A bf16 workload of `seqs` with 8 query heads over 2 KV heads (GQA, 4 per KV head).
inline runtime::WorkloadSpec spec_for(std::vector<runtime::SequenceShape> seqs, std::uint64_t seed,
                                      CacheDType kv_cache_dtype = CacheDType::auto_, int head_size = 128) {
  runtime::WorkloadSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = head_size;
  s.dtype = ScalarType::bf16;
  s.kv_cache_dtype = kv_cache_dtype;
  if (kv_cache_dtype != CacheDType::auto_) {
    // Per-KV-head scales that differ, so a writer using the wrong head's scale shows.
    s.k_scales = {0.05f, 0.09f};
    s.v_scales = {0.5f, 1.3f};
  }
  s.sequences = std::move(seqs);
  s.seed = seed;
  return s;
}

}  // namespace attnsel::kernel::cuda::testing

#define REQUIRE_GPU()                                                                                     \
  do {                                                                                                    \
    if (!::attnsel::kernel::cuda::testing::gpu_available())                                               \
      GTEST_SKIP() << "no GPU for the CUDA kernels: " << ::attnsel::kernel::cuda::cuda_kernels_unavailable_reason(); \
  } while (0)

#define REQUIRE_SPARSE_GPU()                                                                            \
  do {                                                                                                  \
    if (!::attnsel::kernel::cuda::testing::sparse_mla_gpu_available())                                  \
      GTEST_SKIP() << "no GPU the sparse MLA CUDA kernels run on (compute capability 8.x or 9.x): "     \
                   << (::attnsel::kernel::cuda::cuda_kernels_unavailable_reason().empty()               \
                           ? "another compute capability"                                               \
                           : ::attnsel::kernel::cuda::cuda_kernels_unavailable_reason());               \
  } while (0)

// GPU tests run where the CUDA kernels can run and skip, saying why, everywhere else.
#pragma once

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kernels/device/cuda/device_memory.hpp"
#include "kernels/attention/cuda/flash_attn_cuda.hpp"
#include "kernels/output_error.hpp"
#include "kernels/attention/reference.hpp"

namespace attnsel::kernel::cuda::testing {

inline bool gpu_available() { return cuda_kernels_built() && cuda_kernels_unavailable_reason().empty(); }

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

}  // namespace attnsel::kernel::cuda::testing

#define REQUIRE_GPU()                                                                                     \
  do {                                                                                                    \
    if (!::attnsel::kernel::cuda::testing::gpu_available())                                               \
      GTEST_SKIP() << "no GPU for the CUDA kernels: " << ::attnsel::kernel::cuda::cuda_kernels_unavailable_reason(); \
  } while (0)

// vLLM's indexer_k_quant_and_cache on the CPU (csrc/cache_kernels.cu): each new token's key
// as e4m3 values with one power-of-two scale, into its block's value and scale areas.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/element_access.hpp"
#include "kernels/sparse_mla/cpu/indexer_steps.hpp"
#include "kernels/sparse_mla/formats.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

int IndexerStep::team() const { return std::max(1, std::min(plan.threads, omp_get_max_threads())); }

void write_keys(const IndexerStep& s, const TensorView& k, const TensorView& key_cache) {
  const mla::MlaBatch& b = s.plan.batch;
  const int D = s.params.head_dim, B = b.block_size;
  const int tokens = b.num_actual_tokens;
#pragma omp parallel for schedule(static) num_threads(s.team()) if (tokens >= 256)
  for (int t = 0; t < tokens; ++t) {
    const std::int64_t slot = b.slot_mapping[static_cast<std::size_t>(t)];
    if (slot < 0) continue;
    const std::uint8_t* key = element_at(k, t);
    float amax = 0.0f;
    for (int d = 0; d < D; ++d) amax = std::fmax(amax, std::fabs(load_activation(k.dtype, key, d)));
    const float scale = indexer_key_scale(amax);
    auto* block = static_cast<std::uint8_t*>(key_cache.data) + (slot / B) * key_cache.stride[0];
    const std::int64_t offset = slot % B;
    std::uint8_t* values = block + indexer_value_offset(D, offset);
    for (int d = 0; d < D; ++d) values[d] = encode_e4m3(load_activation(k.dtype, key, d) / scale);  // vLLM divides
    std::memcpy(block + indexer_scale_offset(D, B, offset), &scale, sizeof(float));
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu

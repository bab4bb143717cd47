// vLLM's concat_and_cache_mla on the CPU (csrc/cache_kernels.cu): each token's latent, then
// its rope key, into its slot (steps.hpp).
#include <cstring>

#include "kernels/element_access.hpp"
#include "kernels/fp8.hpp"
#include "kernels/mla/cpu/steps.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

// `n` entries of `src` (activation dtype) into `dst`: a copy, or e4m3(x / k_scale) — vLLM
// divides (scaled_convert), saturating to ±448 and rounding to nearest even.
void write_entries(std::uint8_t* dst, const std::uint8_t* src, int n, ScalarType act, bool fp8, float k_scale) {
  if (!fp8) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * element_size(act));
    return;
  }
  for (int e = 0; e < n; ++e) dst[e] = float_to_fp8(load_activation(act, src, e) / k_scale, ScalarType::fp8_e4m3);
}

}  // namespace

void write_cache_rows(const LayerStep& s, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache) {
  const MlaBatch& b = s.plan.batch;
  const MlaDims& d = s.params.dims;
  const ScalarType act = s.params.dtype;
  const std::size_t stored = element_size(cache.dtype);
  const int tokens = b.num_actual_tokens;
  const bool parallel = static_cast<std::int64_t>(tokens) * d.latent_size() >= (std::int64_t{1} << 18);
#pragma omp parallel for schedule(static) num_threads(s.team()) if (parallel)
  for (int t = 0; t < tokens; ++t) {
    const std::int64_t slot = b.slot_mapping[static_cast<std::size_t>(t)];
    if (slot < 0) continue;
    std::uint8_t* row = paged_row(cache, b.block_size, slot);
    write_entries(row, element_at(kv_c, t), d.kv_lora_rank, act, s.format.fp8, s.params.k_scale);
    write_entries(row + static_cast<std::size_t>(d.kv_lora_rank) * stored, element_at(k_pe, t), d.qk_rope_head_dim,
                  act, s.format.fp8, s.params.k_scale);
  }
}

}  // namespace attnsel::kernel::mla::cpu

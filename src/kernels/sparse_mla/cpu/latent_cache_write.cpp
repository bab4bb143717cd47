// vLLM's concat_and_cache_mla for the sparse layers on the CPU (csrc/cache_kernels.cu): the
// latent and rope key of each new token into its slot, as the activation dtype or as an
// fp8_ds_mla record (power-of-two tile scales, FlashMLA's tests/quant.py and current vLLM).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/element_access.hpp"
#include "kernels/half.hpp"
#include "kernels/sparse_mla/cpu/sparse_steps.hpp"
#include "kernels/sparse_mla/formats.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

// One fp8_ds_mla record from a bf16 latent and rope key.
void write_record(std::uint8_t* record, const std::uint16_t* latent, const std::uint16_t* rope) {
  for (int tile = 0; tile < kDsMlaTiles; ++tile) {
    const std::uint16_t* x = latent + tile * kDsMlaTile;
    float amax = 0.0f;
    for (int i = 0; i < kDsMlaTile; ++i) amax = std::fmax(amax, std::fabs(bf16_to_float(x[i])));
    const float scale = ds_mla_tile_scale(amax);
    for (int i = 0; i < kDsMlaTile; ++i) record[tile * kDsMlaTile + i] = encode_e4m3(bf16_to_float(x[i]) / scale);
    std::memcpy(record + kDsMlaScaleOffset + 4 * tile, &scale, sizeof(float));
  }
  std::memcpy(record + kDsMlaRopeOffset, rope, 2 * kDsMlaRope);  // verbatim
}

}  // namespace

int SparseStep::team() const { return std::max(1, std::min(plan.threads, omp_get_max_threads())); }

void write_latent_rows(const SparseStep& s, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache) {
  const mla::MlaBatch& b = s.plan.batch;
  const MlaDims& d = s.params.dims;
  const std::size_t elem = element_size(s.params.dtype);
  const int tokens = b.num_actual_tokens;
#pragma omp parallel for schedule(static) num_threads(s.team()) if (tokens >= 256)
  for (int t = 0; t < tokens; ++t) {
    const std::int64_t slot = b.slot_mapping[static_cast<std::size_t>(t)];
    if (slot < 0) continue;
    std::uint8_t* row = paged_row(cache, b.block_size, slot);
    const std::uint8_t* latent = element_at(kv_c, t);
    const std::uint8_t* rope = element_at(k_pe, t);
    if (s.format.ds_mla) {
      write_record(row, reinterpret_cast<const std::uint16_t*>(latent), reinterpret_cast<const std::uint16_t*>(rope));
    } else {
      std::memcpy(row, latent, static_cast<std::size_t>(d.kv_lora_rank) * elem);
      std::memcpy(row + static_cast<std::size_t>(d.kv_lora_rank) * elem, rope,
                  static_cast<std::size_t>(d.qk_rope_head_dim) * elem);
    }
  }
}

}  // namespace attnsel::kernel::sparse_mla::cpu

#include "kernels/mla/cpu/weights.hpp"

namespace attnsel::kernel::mla::cpu {

std::size_t LayerWeights::bytes() const {
  std::size_t b = 0;
  for (const auto* set : {&absorb, &up})
    for (const PackedMatrix& m : *set) b += m.bytes();
  return b;
}

LayerWeights pack_layer_weights(const MlaLayerParams& p, bool bf16_pairs) {
  LayerWeights w;
  const TensorView& kvb = p.kv_b_proj;
  if (kvb.data == nullptr) return w;
  const MlaDims& d = p.dims;
  const int head_rows = d.qk_nope_head_dim + d.v_head_dim;
  const std::size_t elem = element_size(kvb.dtype);
  for (int n = 0; n < d.num_heads; ++n) {
    const auto* rows = static_cast<const std::uint8_t*>(kvb.data) +
                       static_cast<std::size_t>(n) * static_cast<std::size_t>(head_rows) *
                           static_cast<std::size_t>(kvb.stride[0]) * elem;
    // absorb: B[i][l] = row i (< qk_nope) entry l; up: B[l][j] = row j entry l.
    w.absorb.push_back(pack_matrix(rows, kvb.dtype, d.qk_nope_head_dim, d.kv_lora_rank, kvb.stride[0], 1, bf16_pairs));
    w.up.push_back(pack_matrix(rows, kvb.dtype, d.kv_lora_rank, head_rows, 1, kvb.stride[0], bf16_pairs));
  }
  return w;
}

}  // namespace attnsel::kernel::mla::cpu

// A layer's kv_b_proj, packed once for the CPU products when its implementation is made
// (vLLM's MLACommonImpl.process_weights_after_loading makes W_UK_T and W_UV the same way):
// per head n, with W = the head's qk_nope + v_head rows of kv_b_proj,
//   absorb[n] = W_UK_T[n], [qk_nope × kv_lora_rank]: q_nope · absorb[n] is the latent query;
//   up[n]     = Wᵀ, [kv_lora_rank × (qk_nope + v_head)]: latent · up[n] = [k_nope | v], and its
//               last v_head columns are W_UV[n] (latent output · W_UV[n] = the head's output).
// Thread-safety: immutable after packing.
#pragma once

#include <vector>

#include "attnsel/mla.hpp"
#include "kernels/mla/cpu/gemm.hpp"

namespace attnsel::kernel::mla::cpu {

struct LayerWeights {
  std::vector<PackedMatrix> absorb, up;
  bool empty() const { return up.empty(); }
  std::size_t bytes() const;
};

/// Packs p.kv_b_proj (none when it has no data): bf16 pairs for the AVX-512-BF16 products
/// (a bf16 layer), else f32.
LayerWeights pack_layer_weights(const MlaLayerParams& p, bool bf16_pairs);

}  // namespace attnsel::kernel::mla::cpu

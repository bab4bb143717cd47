// The absorbed MLA's per-head products around the latent attention (vLLM's MLACommonImpl
// forward_mqa path), shared by the CPU MLA decode and the CPU sparse MLA: the query's
// absorption before it, q_latent = [q_nope · W_UK_T | q_pe] (rounded to the activation dtype,
// as vLLM's bmm), and the de-absorption after it, output = latent output · W_UV. Each
// spreads heads and blocks of kGemmRowBlock rows over `team` threads of the caller's OpenMP
// team; a row's result does not depend on the batch or the team.
#pragma once

#include <cstdint>

#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"
#include "kernels/mla/cpu/weights.hpp"

namespace attnsel::kernel::mla::cpu {

/// q_latent [rows, heads, latent_size] from q [rows, heads, qk_head_size], both of the
/// activation dtype: each head's q_nope · absorb[head], then its q_pe copied.
void absorb_queries(const LayerWeights& w, const MlaDims& d, const TensorView& q, const TensorView& q_latent,
                    std::int64_t rows, int team);

/// output [rows, heads, v_head_dim] from latent_out [rows, heads, kv_lora_rank] (the
/// activation dtype): each head's latent output · W_UV[head].
void unabsorb_outputs(const LayerWeights& w, const MlaDims& d, const TensorView& latent_out, const TensorView& output,
                      std::int64_t rows, int team);

}  // namespace attnsel::kernel::mla::cpu

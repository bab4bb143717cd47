// Host-side checks of the sparse MLA kernels' arguments, shared by every device's
// implementation: the indexer's and the sparse attention's layer parameters, their caches,
// and the StepShapes their calls are checked against. Every check names the argument, the
// value and the valid choices (ValueError), and runs before a kernel touches memory. The
// per-call tensor checks are the MLA kernels' (kernels/mla/validation.hpp).
// Thread-safety: pure functions.
#pragma once

#include <string_view>

#include "attnsel/kernel.hpp"
#include "attnsel/sparse_mla.hpp"
#include "kernels/mla/batch.hpp"

namespace attnsel::kernel::sparse_mla {

/// How a sparse layer's latent cache stores a token.
struct LatentFormat {
  ScalarType stored = ScalarType::bf16;  ///< the activation dtype, or u8 for fp8_ds_mla
  bool ds_mla = false;                   ///< 656-byte fp8_ds_mla records
  int entry = 576;                       ///< elements of `stored` per token
};

/// The layer's latent cache format: auto / bfloat16 / float16 (which must name the
/// activation dtype) or fp8_ds_mla (bf16 layers: its rope values are bf16). ValueError for
/// any other kv_cache_dtype, listing the valid ones.
LatentFormat latent_format(const SparseMlaLayerParams& p);

/// The MLA layer parameters the sparse layer's absorbed attention runs with (its dims,
/// dtype, scale, kv_b_proj, batch invariance; the cache as the activation dtype).
MlaLayerParams mla_params(const SparseMlaLayerParams& p);

/// The checks of a sparse attention layer when its implementation is made: the MLA layer's
/// (kernels/mla/validation.hpp: heads, dimensions, dtype, scale, kv_b_proj), DeepSeek's
/// dimensions, the cache format and 1 <= topk <= limits.max_topk.
void validate_sparse_layer(const SparseMlaLayerParams& p, const SparseMlaKernelLimits& limits, DeviceKind device,
                           std::string_view kernel);

/// The latent cache of plan(): [num_blocks >= 1, block_size >= 1, entry] of the format's
/// type on `device`, unit stride over the entries, token rows that do not overlap and blocks
/// packed (block stride = block_size × token stride), so that a physical row r = block ·
/// block_size + offset sits at r × token stride.
void validate_latent_cache(const SparseMlaLayerParams& p, const TensorView& cache, DeviceKind device);

/// The checks of an indexer layer: 1 <= num_heads <= limits.max_heads, head_dim 128 (one
/// quantisation block), 1 <= topk <= limits.max_topk, an activation dtype.
void validate_indexer_layer(const IndexerLayerParams& p, const IndexerKernelLimits& limits);

/// A plan option's decode_query_len (`option` names it): 1 to `max` query tokens per decode
/// request of `kernel`.
void check_decode_query_len(std::string_view option, int value, std::string_view kernel, int max);

/// An indexer plan's options: decode_query_len as check_decode_query_len (1 to
/// limits.max_decode_query_len), logits_bytes not negative.
void check_indexer_plan_options(const IndexerPlanOptions& options, const IndexerKernelLimits& limits,
                                std::string_view kernel);

/// The key cache of plan(): u8 [num_blocks >= 1, block_size >= 1, head_dim + 4], each
/// block's bytes contiguous (token stride head_dim + 4, unit stride) and blocks that do not
/// overlap.
void validate_key_cache(const IndexerLayerParams& p, const TensorView& key_cache, DeviceKind device);

/// A call's key cache against its plan: validate_key_cache, then the plan's geometry
/// (ValueError prefixed "key_cache: ").
void check_planned_key_cache(const IndexerLayerParams& p, const TensorView& key_cache, const StepShape& plan,
                             DeviceKind device);

/// A call's indexer inputs: q [num_actual_tokens, num_heads, head_dim] of the layer's dtype
/// and weights [num_actual_tokens, num_heads] in f32 or the layer's dtype.
void check_indexer_inputs(const IndexerLayerParams& p, const TensorView& q, const TensorView& weights,
                          const StepShape& plan);

/// The plan's key-cache geometry as a view without data, so a plan can be rebuilt from its
/// shape alone (update()): kernels/mla/step_plan.hpp's planned_cache_geometry.
TensorView planned_key_cache_geometry(const StepShape& shape, DeviceKind device);

/// The StepShape of a plan over `cache` ([num_blocks, block_size, width]): the batch's size,
/// the activation dtype, heads, and the cache's geometry as [num_blocks, block_size, 1,
/// width] (what kernels/mla/validation.hpp's check_planned_cache compares); not causal
/// (kernels/mla/step_plan.hpp's row_cache_step_shape).
StepShape step_shape(const mla::MlaBatch& batch, ScalarType dtype, int num_heads, const TensorView& cache,
                     bool batch_invariant);

}  // namespace attnsel::kernel::sparse_mla

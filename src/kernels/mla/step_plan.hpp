// What every MLA implementation's step plan holds, whatever its device: the step's batch
// (MlaBatch), which mla_step_summary reads, and the StepShape its calls are checked against.
// Thread-safety: as StepPlan.
#pragma once

#include "attnsel/kernel.hpp"
#include "attnsel/mla.hpp"
#include "kernels/mla/batch.hpp"

namespace attnsel::kernel::mla {

/// The base of every MLA implementation's plan.
class MlaStepPlan : public StepPlan {
 public:
  MlaBatch batch;
};

/// The StepShape of a plan over a cache of one row per token, [num_blocks, block_size,
/// width] (the MLA latent cache, the sparse layers' caches): the batch's size, `dtype`,
/// `num_heads`, and the cache's geometry as [num_blocks, block_size, 1, width] (one KV head).
StepShape row_cache_step_shape(const MlaBatch& batch, ScalarType dtype, int num_heads, const TensorView& cache,
                               bool causal, bool batch_invariant);

/// The StepShape of an MLA plan: row_cache_step_shape of the layer's dtype and heads, causal.
StepShape mla_step_shape(const MlaLayerParams& p, const TensorView& cache, const MlaBatch& batch);

/// The cache geometry a StepShape of row_cache_step_shape records, as a view without data
/// (its data is not read): what a plan is rebuilt over when only its shape is known (update()).
TensorView planned_cache_geometry(const StepShape& shape, DeviceKind device);

}  // namespace attnsel::kernel::mla

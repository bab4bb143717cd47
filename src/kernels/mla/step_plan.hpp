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

/// The StepShape of an MLA plan: the batch's size, the activation dtype, and the cache's
/// geometry as [num_blocks, block_size, 1, latent_size] (one KV head: the latent).
StepShape mla_step_shape(const MlaLayerParams& p, const TensorView& cache, const MlaBatch& batch);

}  // namespace attnsel::kernel::mla

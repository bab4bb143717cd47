#include "kernels/mla/step_plan.hpp"

#include "attnsel/errors.hpp"

namespace attnsel::kernel {

MlaStepSummary mla_step_summary(const StepPlan& plan) {
  const auto* mla_plan = dynamic_cast<const mla::MlaStepPlan*>(&plan);
  if (mla_plan == nullptr)
    throw ValueError("mla_step_summary needs a plan made by an MLA implementation (MlaImpl::plan); this one was made "
                     "by another kind of kernel");
  return mla_plan->batch.summary();
}

namespace mla {

StepShape row_cache_step_shape(const MlaBatch& batch, ScalarType dtype, int num_heads, const TensorView& cache,
                               bool causal, bool batch_invariant) {
  StepShape s;
  s.num_seqs = batch.num_seqs;
  s.num_actual_tokens = batch.num_actual_tokens;
  s.max_blocks_per_seq = batch.max_blocks_per_seq;
  s.slot_mapping = batch.slot_mapping.size() == static_cast<std::size_t>(batch.num_actual_tokens) &&
                   (batch.num_actual_tokens == 0 || !batch.slot_mapping.empty());
  s.dtype = dtype;
  s.device = cache.device;
  s.device_index = cache.device_index;
  s.num_heads = num_heads;
  s.num_kv_heads = 1;
  s.head_size = static_cast<int>(cache.shape[2]);
  s.cache_dtype = cache.dtype;
  const std::int64_t shape[4] = {cache.shape[0], cache.shape[1], 1, cache.shape[2]};
  const std::int64_t strides[4] = {cache.stride[0], cache.stride[1], cache.shape[2], cache.stride[2]};
  for (int d = 0; d < 4; ++d) {
    s.cache_shape[d] = shape[d];
    s.key_strides[d] = strides[d];
    s.value_strides[d] = strides[d];
  }
  s.causal = causal;
  s.batch_invariant = batch_invariant;
  return s;
}

StepShape mla_step_shape(const MlaLayerParams& p, const TensorView& cache, const MlaBatch& batch) {
  return row_cache_step_shape(batch, p.dtype, p.dims.num_heads, cache, true, p.batch_invariant);
}

TensorView planned_cache_geometry(const StepShape& shape, DeviceKind device) {
  TensorView g;
  g.ndim = 3;
  g.dtype = shape.cache_dtype;
  g.device = device;
  g.device_index = shape.device_index;
  g.shape[0] = shape.cache_shape[0];
  g.shape[1] = shape.cache_shape[1];
  g.shape[2] = shape.cache_shape[3];
  g.stride[0] = shape.key_strides[0];
  g.stride[1] = shape.key_strides[1];
  g.stride[2] = 1;
  return g;
}

}  // namespace mla
}  // namespace attnsel::kernel

// The CPU indexer's IndexerImpl: the checks of every call, then the steps (indexer_steps.hpp).
#include "kernels/sparse_mla/cpu/cpu_indexer.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <utility>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/mla/validation.hpp"
#include "kernels/sparse_mla/cpu/indexer_plan.hpp"
#include "kernels/sparse_mla/cpu/indexer_steps.hpp"
#include "kernels/sparse_mla/validation.hpp"
#include "kernels/mla/batch.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

const char kCpuIndexerPlanMaker = 0;

// The context chunks of kernels/mla/batch.hpp do not apply to the indexer: one chunk.

bool uses_bf16_dot(const CpuIndexerOptions& o) { return o.allow_bf16_dot && kernel::cpu::cpu_has_bf16_dot(); }

class CpuIndexerImpl final : public IndexerImpl {
 public:
  CpuIndexerImpl(const IndexerLayerParams& p, CpuIndexerOptions o) : IndexerImpl(p), options_(o) {
    validate_indexer_layer(params_, cpu_indexer_limits());
    bf16_dot_ = uses_bf16_dot(options_);
  }

  KernelInfo kernel_info() const override {
    KernelInfo k;
    k.available = true;
    k.device = DeviceKind::cpu;
    k.isa = cpu_indexer_isa(options_);
    k.graph_support = GraphSupport::never;  // host code: nothing to capture
    return k;
  }
  IndexerKernelLimits limits() const override { return cpu_indexer_limits(); }

  std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& key_cache, Stream,
                                 const IndexerPlanOptions& options) const override {
    validate_key_cache(params_, key_cache, DeviceKind::cpu);
    check_indexer_plan_options(options, limits(), "the CPU indexer");
    auto plan = std::make_unique<CpuIndexerPlan>();
    plan->options = options;
    build(*plan, md, key_cache);
    return plan;
  }

  void update(StepPlan& base, const AttentionMetadata& md, Stream) const override {
    CpuIndexerPlan& plan = own(base);
    build(plan, md, planned_key_cache_geometry(plan.shape(), DeviceKind::cpu));
  }

  void write_cache(const StepPlan& base, const TensorView& k, const TensorView& key_cache, Stream) const override {
    const CpuIndexerPlan& plan = own(base);
    mla::require_slot_mapping(plan.shape());
    mla::check_tensor(k, "k", {plan.batch.num_actual_tokens, params_.head_dim}, params_.dtype, plan.shape());
    check_planned_key_cache(params_, key_cache, plan.shape(), DeviceKind::cpu);
    mla::check_no_overlap(key_cache, "key_cache", k, "k");
    write_keys(step(plan), k, key_cache);
  }

  void logits(const StepPlan& base, const TensorView& q, const TensorView& weights, const TensorView& key_cache,
              const TensorView& logits, Stream) const override {
    const CpuIndexerPlan& plan = own(base);
    check_indexer_inputs(params_, q, weights, plan.shape());
    check_planned_key_cache(params_, key_cache, plan.shape(), DeviceKind::cpu);
    const int T = plan.batch.num_actual_tokens;
    const std::int64_t width = std::max(plan.batch.max_seq_len, 1);
    if (logits.ndim != 2 || logits.shape[0] < T || logits.shape[1] < width || logits.dtype != ScalarType::f32 ||
        logits.device != DeviceKind::cpu || (logits.shape[1] > 1 && logits.stride[1] != 1) || logits.stride[0] < 0)
      throw ValueError(fmt::format("logits must be f32 [>= {}, >= {}] (tokens, max_seq_len) on the cpu with unit "
                                   "stride in its last dimension, got {}",
                                   T, width, logits.describe()));
    if (T > 0 && logits.data == nullptr) throw ValueError("logits has a null data pointer");
    for (const auto& [input, name] : {std::pair{&q, "q"}, std::pair{&weights, "weights"},
                                      std::pair{&key_cache, "key_cache"}})
      mla::check_no_overlap(logits, "logits", *input, name);
    const IndexerStep s = step(plan);
    for (int w = 0; w < static_cast<int>(plan.waves.size()); ++w)
      score_wave(s, w, q, weights, key_cache, logits.as<float>(), logits.stride[0], 0, logits.shape[1]);
  }

  void top_k(const StepPlan& base, const TensorView& q, const TensorView& weights, const TensorView& key_cache,
             const TensorView& indices, Stream) const override {
    const CpuIndexerPlan& plan = own(base);
    check_indexer_inputs(params_, q, weights, plan.shape());
    check_planned_key_cache(params_, key_cache, plan.shape(), DeviceKind::cpu);
    mla::check_tensor(indices, "indices", {plan.batch.num_actual_tokens, params_.topk}, ScalarType::i32, plan.shape());
    for (const auto& [input, name] : {std::pair{&q, "q"}, std::pair{&weights, "weights"},
                                      std::pair{&key_cache, "key_cache"}})
      mla::check_no_overlap(indices, "indices", *input, name);
    const IndexerStep s = step(plan);
    for (int w = 0; w < static_cast<int>(plan.waves.size()); ++w) {
      const ScoreWave& wave = plan.waves[static_cast<std::size_t>(w)];
      score_wave(s, w, q, weights, key_cache, plan.logits.as<float>(), plan.logits_stride, wave.token_begin, 0);
      select_wave(s, w, indices.as<std::int32_t>(), indices.stride[0]);
    }
  }

 private:
  IndexerStep step(const CpuIndexerPlan& plan) const { return IndexerStep{params_, plan, bf16_dot_}; }

  CpuIndexerPlan& own(const StepPlan& base) const {
    if (plan_maker(base) != &kCpuIndexerPlanMaker)
      throw ValueError("this plan was not made by a CPU indexer implementation: build it with this layer's plan()");
    auto& plan = const_cast<CpuIndexerPlan&>(static_cast<const CpuIndexerPlan&>(base));
    if (plan.shape().num_heads != params_.num_heads || plan.shape().dtype != params_.dtype)
      throw ValueError(fmt::format("the indexer layer ({} heads, {}) is not in the plan's group ({} heads, {}): build "
                                   "one plan per layer group",
                                   params_.num_heads, to_string(params_.dtype), plan.shape().num_heads,
                                   to_string(plan.shape().dtype)));
    return plan;
  }

  void build(CpuIndexerPlan& plan, const AttentionMetadata& md, const TensorView& key_cache) const {
    MlaPlanOptions batch_options;
    batch_options.decode_query_len = plan.options.decode_query_len;
    MlaKernelLimits batch_limits;
    batch_limits.max_decode_query_len = limits().max_decode_query_len;
    mla::build_batch(plan.batch, md, key_cache, batch_options, batch_limits, kernel::mla::kNoContextChunks);
    plan.threads = options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads();
    build_indexer_work(plan, params_, bf16_dot_);
    set_plan_fields(plan, step_shape(plan.batch, params_.dtype, params_.num_heads, key_cache, false),
                    &kCpuIndexerPlanMaker);
  }

  CpuIndexerOptions options_;
  bool bf16_dot_ = false;
};

}  // namespace

IndexerKernelLimits cpu_indexer_limits() { return IndexerKernelLimits{}; }

std::unique_ptr<IndexerImpl> make_cpu_indexer_impl(const IndexerLayerParams& params, CpuIndexerOptions options) {
  return std::make_unique<CpuIndexerImpl>(params, options);
}

std::string cpu_indexer_isa(CpuIndexerOptions options) {
  kernel::cpu::LayerCtx c;
  c.bf16_dot = uses_bf16_dot(options);
  return kernel::cpu::kernel_target_name(c);
}

}  // namespace attnsel::kernel::sparse_mla::cpu

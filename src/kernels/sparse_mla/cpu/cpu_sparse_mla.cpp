// The CPU sparse MLA kernel's SparseMlaImpl: the checks of every call, then the steps
// (sparse_steps.hpp).
#include "kernels/sparse_mla/cpu/cpu_sparse_mla.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <limits>
#include <utility>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/mla/step_plan.hpp"
#include "kernels/mla/validation.hpp"
#include "kernels/sparse_mla/cpu/sparse_plan.hpp"
#include "kernels/sparse_mla/cpu/sparse_steps.hpp"
#include "kernels/sparse_mla/validation.hpp"
#include "kernels/mla/batch.hpp"

namespace attnsel::kernel::sparse_mla::cpu {

namespace {

const char kCpuSparseMlaPlanMaker = 0;
constexpr std::string_view kKernelName = "CPU_MLA_SPARSE";
// The context chunks of kernels/mla/batch.hpp do not apply to the sparse path: one chunk.

bool uses_bf16_dot(ScalarType dtype, const CpuSparseMlaOptions& o) {
  return o.allow_bf16_dot && dtype == ScalarType::bf16 && kernel::cpu::cpu_has_bf16_dot();
}

class CpuSparseMlaImpl final : public SparseMlaImpl {
 public:
  CpuSparseMlaImpl(const SparseMlaLayerParams& p, CpuSparseMlaOptions o) : SparseMlaImpl(p), options_(o) {
    validate_sparse_layer(params_, cpu_sparse_mla_limits(), DeviceKind::cpu, kKernelName);
    format_ = latent_format(params_);
    bf16_dot_ = uses_bf16_dot(params_.dtype, options_);
    weights_ = mla::cpu::pack_layer_weights(mla_params(params_), bf16_dot_);
    params_.kv_b_proj.data = nullptr;  // the packed copy is what the kernel reads; the caller's may go
  }

  KernelInfo kernel_info() const override {
    KernelInfo k;
    k.available = true;
    k.device = DeviceKind::cpu;
    k.isa = cpu_sparse_mla_isa(params_.dtype, options_);
    k.graph_support = GraphSupport::never;  // host code: nothing to capture
    k.lse_output = true;                    // attend_latent's
    return k;
  }
  SparseMlaKernelLimits limits() const override { return cpu_sparse_mla_limits(); }

  std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& cache, Stream,
                                 const SparseMlaPlanOptions& options) const override {
    validate_latent_cache(params_, cache, DeviceKind::cpu);
    if (cache.shape[0] * cache.shape[1] > std::numeric_limits<std::int32_t>::max())
      throw ValueError(fmt::format("cache {} holds more than 2^31 - 1 rows: index rows are int32", cache.describe()));
    check_decode_query_len("SparseMlaPlanOptions::decode_query_len", options.decode_query_len, kKernelName,
                           limits().max_decode_query_len);
    auto plan = std::make_unique<CpuSparseMlaPlan>();
    plan->options = options;
    build(*plan, md, cache);
    return plan;
  }

  void update(StepPlan& base, const AttentionMetadata& md, Stream) const override {
    CpuSparseMlaPlan& plan = own(base);
    build(plan, md, mla::planned_cache_geometry(plan.shape(), DeviceKind::cpu));
  }

  void write_cache(const StepPlan& base, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache,
                   Stream) const override {
    const CpuSparseMlaPlan& plan = own(base);
    mla::check_latent_write_inputs(plan.shape(), params_.dims, params_.dtype, kv_c, k_pe);
    check_cache(plan, cache);
    mla::check_no_overlap(cache, "cache", kv_c, "kv_c");
    mla::check_no_overlap(cache, "cache", k_pe, "k_pe");
    write_latent_rows(step(plan), kv_c, k_pe, cache);
  }

  void physical_indices(const StepPlan& base, const TensorView& local, const TensorView& physical,
                        Stream) const override {
    const CpuSparseMlaPlan& plan = own(base);
    const int T = plan.batch.num_actual_tokens;
    mla::check_tensor(local, "local", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla::check_tensor(physical, "physical", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla::check_no_overlap(physical, "physical", local, "local");
    to_physical(step(plan), local.as<std::int32_t>(), local.stride[0], physical.as<std::int32_t>(), physical.stride[0]);
  }

  void execute(const StepPlan& base, const TensorView& q, const TensorView& indices, const TensorView& cache,
               const TensorView& output, Stream) const override {
    const CpuSparseMlaPlan& plan = own(base);
    if (weights_.empty())
      throw ValueError("execute needs the layer's kv_b_proj (SparseMlaLayerParams::kv_b_proj had no data when the "
                       "implementation was made: such a layer runs attend_latent only)");
    const MlaDims& d = params_.dims;
    const int T = plan.batch.num_actual_tokens;
    mla::check_tensor(q, "q", {T, d.num_heads, d.qk_head_size()}, params_.dtype, plan.shape());
    mla::check_tensor(indices, "indices", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla::check_tensor(output, "output", {T, d.num_heads, d.v_head_dim}, params_.dtype, plan.shape());
    check_cache(plan, cache);
    for (const auto& [input, name] : {std::pair{&q, "q"}, std::pair{&indices, "indices"}, std::pair{&cache, "cache"}})
      mla::check_no_overlap(output, "output", *input, name);
    execute_sparse(step(plan), q, indices.as<std::int32_t>(), indices.stride[0], cache, output);
  }

  void attend_latent(const StepPlan& base, const TensorView& q_latent, const TensorView& indices,
                     const TensorView& cache, const TensorView& out, Stream, const TensorView* lse) const override {
    const CpuSparseMlaPlan& plan = own(base);
    const MlaDims& d = params_.dims;
    const int T = plan.batch.num_actual_tokens;
    mla::check_tensor(q_latent, "q_latent", {T, d.num_heads, d.latent_size()}, params_.dtype, plan.shape());
    mla::check_tensor(indices, "indices", {T, params_.topk}, ScalarType::i32, plan.shape());
    mla::check_tensor(out, "out", {T, d.num_heads, d.kv_lora_rank}, params_.dtype, plan.shape());
    check_cache(plan, cache);
    for (const auto& [input, name] :
         {std::pair{&q_latent, "q_latent"}, std::pair{&indices, "indices"}, std::pair{&cache, "cache"}})
      mla::check_no_overlap(out, "out", *input, name);
    if (lse) {
      if (!plan.lse())
        throw ValueError("attend_latent with an lse output needs a plan built with SparseMlaPlanOptions::lse");
      mla::check_tensor(*lse, "lse", {T, d.num_heads}, ScalarType::f32, plan.shape());
      for (const auto& [input, name] : {std::pair{&q_latent, "q_latent"}, std::pair{&indices, "indices"},
                                        std::pair{&cache, "cache"}, std::pair{&out, "out"}})
        mla::check_no_overlap(*lse, "lse", *input, name);
    }
    check_rows(plan, indices);
    sparse_latent_attention(step(plan), q_latent, indices.as<std::int32_t>(), indices.stride[0], cache, out,
                            lse ? lse->as<float>() : nullptr, lse ? lse->stride[0] : 0);
  }

 private:
  SparseStep step(const CpuSparseMlaPlan& plan) const {
    return SparseStep{params_, weights_, plan, format_, bf16_dot_};
  }

  CpuSparseMlaPlan& own(const StepPlan& base) const {
    if (plan_maker(base) != &kCpuSparseMlaPlanMaker)
      throw ValueError("this plan was not made by a CPU sparse MLA implementation: build it with this layer's plan()");
    auto& plan = const_cast<CpuSparseMlaPlan&>(static_cast<const CpuSparseMlaPlan&>(base));
    mla::check_plan_group(plan.shape(), params_.dims.num_heads, params_.dtype, params_.batch_invariant);
    return plan;
  }

  void check_cache(const CpuSparseMlaPlan& plan, const TensorView& cache) const {
    validate_latent_cache(params_, cache, DeviceKind::cpu);
    mla::check_planned_cache(cache, plan.shape());
  }

  // Every entry of the physical index rows is -1 or a row of the cache.
  void check_rows(const CpuSparseMlaPlan& plan, const TensorView& indices) const {
    const std::int64_t rows = plan.shape().cache_shape[0] * plan.shape().cache_shape[1];
    for (int t = 0; t < plan.batch.num_actual_tokens; ++t) {
      const std::int32_t* row = indices.as<std::int32_t>() + t * indices.stride[0];
      for (int k = 0; k < params_.topk; ++k)
        if (row[k] < -1 || row[k] >= rows)
          throw ValueError(fmt::format("indices[{}][{}] = {} is not a row of the cache: valid rows are [0, {}) "
                                       "(num_blocks x block_size = {} x {}), or -1 for none",
                                       t, k, row[k], rows, plan.shape().cache_shape[0], plan.shape().cache_shape[1]));
    }
  }

  void build(CpuSparseMlaPlan& plan, const AttentionMetadata& md, const TensorView& cache) const {
    MlaPlanOptions batch_options;
    batch_options.decode_query_len = plan.options.decode_query_len;
    MlaKernelLimits batch_limits;
    batch_limits.max_decode_query_len = limits().max_decode_query_len;
    batch_limits.max_heads = limits().max_heads;
    mla::build_batch(plan.batch, md, cache, batch_options, batch_limits, kernel::mla::kNoContextChunks);
    plan.threads = options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads();
    build_sparse_work(plan, params_, format_.ds_mla);
    set_plan_fields(plan, step_shape(plan.batch, params_.dtype, params_.dims.num_heads, cache, params_.batch_invariant),
                    plan.options.lse, &kCpuSparseMlaPlanMaker);
  }

  CpuSparseMlaOptions options_;
  LatentFormat format_;
  bool bf16_dot_ = false;
  mla::cpu::LayerWeights weights_;
};

}  // namespace

SparseMlaKernelLimits cpu_sparse_mla_limits() { return SparseMlaKernelLimits{}; }

std::unique_ptr<SparseMlaImpl> make_cpu_sparse_mla_impl(const SparseMlaLayerParams& params,
                                                        CpuSparseMlaOptions options) {
  return std::make_unique<CpuSparseMlaImpl>(params, options);
}

std::string cpu_sparse_mla_isa(ScalarType dtype, CpuSparseMlaOptions options) {
  kernel::cpu::LayerCtx c;
  c.bf16_dot = uses_bf16_dot(dtype, options);
  return kernel::cpu::kernel_target_name(c);
}

}  // namespace attnsel::kernel::sparse_mla::cpu

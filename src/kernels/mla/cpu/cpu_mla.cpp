// CPU_MLA's MlaImpl: the checks of every call, then the steps (steps.hpp).
#include "kernels/mla/cpu/cpu_mla.hpp"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>

#include "attnsel/errors.hpp"
#include "kernels/attention/cpu/work.hpp"
#include "kernels/mla/cpu/plan.hpp"
#include "kernels/mla/cpu/steps.hpp"
#include "kernels/mla/cpu/weights.hpp"
#include "kernels/mla/step_plan.hpp"
#include "kernels/mla/validation.hpp"

namespace attnsel::kernel::mla::cpu {

namespace {

constexpr std::int64_t kMaxPositions = 1 << 24;  // the attention kernel holds positions in fp32 lanes
// The default context-chunk workspace: rows whose up-projection ([rows, heads, 192 + 128]
// in the activation dtype) stays near 256 MiB, within vLLM's 65536-row cap.
constexpr std::int64_t kChunkWorkspaceBytes = std::int64_t{256} << 20;
constexpr std::int64_t kMaxChunkWorkspaceRows = 65536;

const char kCpuMlaPlanMaker = 0;

bool uses_bf16_dot(ScalarType dtype, ScalarType stored, const CpuMlaOptions& o) {
  return o.allow_bf16_dot && dtype == ScalarType::bf16 && (stored == ScalarType::bf16 || is_fp8(stored)) &&
         kernel::cpu::cpu_has_bf16_dot();
}

class CpuMlaImpl final : public MlaImpl {
 public:
  CpuMlaImpl(const MlaLayerParams& p, CpuMlaOptions o) : MlaImpl(p), options_(o) {
    validate_layer_params(params_, cpu_mla_limits(), DeviceKind::cpu);
    require_deepseek_dims(params_.dims, "CPU_MLA");
    format_ = cache_format(params_);
    bf16_dot_ = uses_bf16_dot(params_.dtype, format_.stored, options_);
    // The products' bf16 kernel needs bf16 activations and AVX-512-BF16 (the cache does not matter).
    weights_ = pack_layer_weights(params_, options_.allow_bf16_dot && params_.dtype == ScalarType::bf16 &&
                                               kernel::cpu::cpu_has_bf16_dot());
    params_.kv_b_proj.data = nullptr;  // the packed copy is what the kernel reads; the caller's may go
  }

  KernelInfo kernel_info() const override {
    KernelInfo k;
    k.available = true;
    k.device = DeviceKind::cpu;
    k.isa = cpu_mla_isa(params_.dtype, params_.kv_cache_dtype, options_);
    k.graph_support = GraphSupport::never;
    k.lse_output = true;  // decode_latent's
    return k;
  }
  MlaKernelLimits limits() const override { return cpu_mla_limits(); }

  std::unique_ptr<StepPlan> plan(const AttentionMetadata& md, const TensorView& cache, Stream,
                                 const MlaPlanOptions& options) const override {
    if (options.graph_capturable)
      throw ValueError("CPU_MLA runs on the host: its work cannot be captured in a CUDA graph (graph support "
                       "'never'); build the plan without MlaPlanOptions::graph_capturable");
    validate_cache(params_, cache, DeviceKind::cpu);
    auto plan = std::make_unique<CpuMlaPlan>();
    plan->options = options;
    build(*plan, md, cache);
    return plan;
  }

  void update(StepPlan& base, const AttentionMetadata& md, Stream) const override {
    CpuMlaPlan& plan = own(base);
    build(plan, md, planned_cache_geometry(plan.shape(), DeviceKind::cpu));
  }

  void write_cache(const StepPlan& base, const TensorView& kv_c, const TensorView& k_pe, const TensorView& cache,
                   Stream) const override {
    const CpuMlaPlan& plan = own(base);
    check_latent_write_inputs(plan.shape(), params_.dims, params_.dtype, kv_c, k_pe);
    check_cache(plan, cache);
    check_no_overlap(cache, "cache", kv_c, "kv_c");
    check_no_overlap(cache, "cache", k_pe, "k_pe");
    write_cache_rows(step(plan), kv_c, k_pe, cache);
  }

  void execute(const StepPlan& base, const TensorView& q, const TensorView& kv_c, const TensorView& k_pe,
               const TensorView& cache, const TensorView& output, Stream) const override {
    const CpuMlaPlan& plan = own(base);
    if (weights_.empty())
      throw ValueError("execute needs the layer's kv_b_proj (MlaLayerParams::kv_b_proj had no data when the "
                       "implementation was made: such a layer runs decode_latent only)");
    const MlaDims& d = params_.dims;
    const int T = plan.batch.num_actual_tokens;
    check_tensor(q, "q", {T, d.num_heads, d.qk_head_size()}, params_.dtype, plan.shape());
    check_tensor(kv_c, "kv_c", {T, d.kv_lora_rank}, params_.dtype, plan.shape());
    check_tensor(k_pe, "k_pe", {T, d.qk_rope_head_dim}, params_.dtype, plan.shape());
    check_tensor(output, "output", {T, d.num_heads, d.v_head_dim}, params_.dtype, plan.shape());
    check_cache(plan, cache);
    for (const auto& [input, name] : {std::pair{&q, "q"}, std::pair{&kv_c, "kv_c"}, std::pair{&k_pe, "k_pe"},
                                      std::pair{&cache, "cache"}})
      check_no_overlap(output, "output", *input, name);
    const LayerStep s = step(plan);
    execute_decode(s, q, cache, output);
    execute_prefill(s, q, kv_c, k_pe, cache, output);
  }

  void decode_latent(const StepPlan& base, const TensorView& q_latent, const TensorView& cache, const TensorView& out,
                     Stream, const TensorView* lse) const override {
    const CpuMlaPlan& plan = own(base);
    const MlaDims& d = params_.dims;
    const int T = plan.batch.split.num_decode_tokens;
    check_tensor(q_latent, "q_latent", {T, d.num_heads, d.latent_size()}, params_.dtype, plan.shape());
    check_tensor(out, "out", {T, d.num_heads, d.kv_lora_rank}, params_.dtype, plan.shape());
    check_cache(plan, cache);
    check_no_overlap(out, "out", q_latent, "q_latent");
    check_no_overlap(out, "out", cache, "cache");
    if (lse) {
      if (!plan.lse())
        throw ValueError("decode_latent with an lse output needs a plan built with MlaPlanOptions::lse");
      check_tensor(*lse, "lse", {T, d.num_heads}, ScalarType::f32, plan.shape());
      for (const auto& [other, name] : {std::pair{&q_latent, "q_latent"}, std::pair{&cache, "cache"},
                                        std::pair{&out, "out"}})
        check_no_overlap(*lse, "lse", *other, name);
    }
    latent_attention(step(plan), q_latent, cache, out, lse ? static_cast<float*>(lse->data) : nullptr,
                     lse ? lse->stride[0] : 0);
  }

 private:
  LayerStep step(const CpuMlaPlan& plan) const { return LayerStep{params_, weights_, plan, format_, bf16_dot_}; }

  // The plan, when this kind of implementation made it for a layer of this one's group.
  CpuMlaPlan& own(const StepPlan& base) const {
    if (plan_maker(base) != &kCpuMlaPlanMaker)
      throw ValueError("this plan was not made by a CPU_MLA implementation: build it with this layer's plan()");
    auto& plan = const_cast<CpuMlaPlan&>(static_cast<const CpuMlaPlan&>(base));
    check_plan_group(plan.shape(), params_.dims.num_heads, params_.dtype, params_.batch_invariant);
    return plan;
  }

  void check_cache(const CpuMlaPlan& plan, const TensorView& cache) const {
    validate_cache(params_, cache, DeviceKind::cpu);
    check_planned_cache(cache, plan.shape());
  }

  void build(CpuMlaPlan& plan, const AttentionMetadata& md, const TensorView& cache) const {
    const MlaDims& d = params_.dims;
    const std::int64_t row_bytes = static_cast<std::int64_t>(d.num_heads) * (d.qk_head_size() + d.v_head_dim) *
                                   static_cast<std::int64_t>(element_size(params_.dtype));
    const std::int64_t default_chunk = std::clamp<std::int64_t>(kChunkWorkspaceBytes / row_bytes, 1, kMaxChunkWorkspaceRows);
    build_batch(plan.batch, md, cache, plan.options, cpu_mla_limits(), default_chunk);
    if (plan.batch.max_seq_len >= kMaxPositions)
      throw ValueError(fmt::format("max_seq_len = {} exceeds CPU_MLA's limit of {} tokens", plan.batch.max_seq_len,
                                   kMaxPositions - 1));
    plan.threads = options_.num_threads > 0 ? options_.num_threads : omp_get_max_threads();
    build_work(plan, params_, options_.decode_splits);
    set_plan_fields(plan, mla_step_shape(params_, cache, plan.batch), false, plan.options.lse, &kCpuMlaPlanMaker);
  }

  CpuMlaOptions options_;
  CacheFormat format_;
  bool bf16_dot_ = false;
  LayerWeights weights_;
};

}  // namespace

MlaKernelLimits cpu_mla_limits() {
  MlaKernelLimits l;
  l.max_decode_query_len = 4;
  l.max_heads = 128;
  return l;
}

std::unique_ptr<MlaImpl> make_cpu_mla_impl(const MlaLayerParams& params, CpuMlaOptions options) {
  return std::make_unique<CpuMlaImpl>(params, options);
}

std::string cpu_mla_isa(ScalarType dtype, CacheDType kv_cache_dtype, CpuMlaOptions options) {
  const bool fp8 = kv_cache_dtype == CacheDType::fp8 || kv_cache_dtype == CacheDType::fp8_e4m3;
  kernel::cpu::LayerCtx c;
  c.bf16_dot = uses_bf16_dot(dtype, fp8 ? ScalarType::fp8_e4m3 : dtype, options);
  return kernel::cpu::kernel_target_name(c);
}

}  // namespace attnsel::kernel::mla::cpu

#include "mla_options.hpp"

#include <fmt/format.h>

#include <cmath>

#include "attnsel/backend.hpp"
#include "attnsel/engine_args.hpp"
#include "attnsel/mla.hpp"

namespace attnsel::cli {

ChosenMlaBackend choose_mla_backend(const PlatformOptions& platform, const BackendChoiceOptions& backend,
                                   const ModelOptions& m) {
  if (!m.mla_model) throw UsageError("the MLA jobs need --model with a DeepSeek-V2/V3 or Kimi-K2 config");
  const ModelSpec& model = *m.mla_model;
  EngineArgs args;
  args.kv_cache_dtype = std::string(cache_dtype_name(m.shape.kv_cache_dtype));
  if (m.block_size > 0) args.block_size = m.block_size;
  args.dtype = m.dtype_request();
  args.tensor_parallel_size = m.tensor_parallel_size;
  std::optional<SelectionMode> mode;
  if (!platform.mode.empty()) mode = as_usage([&] { return parse_mode(platform.mode); });
  ChosenMlaBackend out;
  auto plan_with = [&](const EngineArgs& a) {
    EngineOptions options = as_usage([&] { return parse_engine_args(a); });
    backend.apply(options.engine.attention);  // --attention-backend, --attention-config, --backend-per-kind
    const std::optional<std::string_view> spec =
        platform.platform ? std::optional<std::string_view>(*platform.platform) : std::nullopt;  // nullopt: the host
    out.platform = as_usage([&] { return make_plan_platform(model, options, spec, platform.facts, mode); });
    Selector selector(out.platform);
    return make_plan(model, options, selector);  // no valid backend: PlanError, as `attnsel plan` gives it
  };
  try {
    out.plan = plan_with(args);
  } catch (const PlanError&) {
    // vLLM's CPU MLA backends declare no fp8 cache, which attnsel's CPU kernel computes: an
    // fp8 run selects the backend for the model-dtype cache and runs its kernel on fp8
    // (when that plan fails too, the fp8 plan's error is the one to report).
    if (m.shape.kv_cache_dtype != CacheDType::fp8 && m.shape.kv_cache_dtype != CacheDType::fp8_e4m3) throw;
    EngineArgs model_dtype_cache = args;
    model_dtype_cache.kv_cache_dtype = "auto";
    std::optional<ModelPlan> model_dtype_plan;
    try {
      model_dtype_plan = plan_with(model_dtype_cache);
    } catch (const Error&) {
    }
    if (!model_dtype_plan) throw;  // the fp8 plan's error
    out.plan = std::move(*model_dtype_plan);
    out.kv_cache_dtype_beyond_selection = true;
  }

  const PlanGroup* group = nullptr;
  for (const PlanGroup& g : out.plan.groups) {
    if (!g.mla || g.mixer != MixerKind::attention || g.attn_type != AttentionType::decoder) continue;
    if (group != nullptr && group->backend != g.backend)
      throw NotImplementedError(fmt::format("{}'s MLA layers take two backends ({} for layers {}, {} for layers {}); "
                                            "attnsel run drives one MLA backend for all of them",
                                            model.source, group->backend, group->layers_text, g.backend,
                                            g.layers_text));
    if (group == nullptr) group = &g;
    out.num_layers += static_cast<int>(g.layers.size());
  }
  if (group == nullptr || !group->selection)
    throw UsageError(fmt::format("{} has no MLA decoder layer with a chosen backend", model.source));
  out.selection = group->selection;
  out.layers_text = group->layers_text;
  const std::shared_ptr<const AttentionBackend> cls = group->selection->backend_class;
  if (!cls->has_kernel()) throw NotImplementedError(cls->missing_kernel_reason());

  runtime::MlaLayerShape& layer = out.layer;
  layer.dims = as_usage([&] { return mla_kernel_dims(*group); });
  layer.scale = static_cast<float>(group->mla->softmax_scale);
  layer.dtype = kernel::scalar_type(out.plan.dtype);
  layer.kv_cache_dtype = out.kv_cache_dtype_beyond_selection ? m.shape.kv_cache_dtype : out.plan.kv_cache_dtype;
  layer.block_size = group->kernel_block_size.value_or(out.plan.block_size.block_size);
  out.kernel = cls->kernel_info(layer.dtype, layer.kv_cache_dtype);
  out.isa = out.kernel.isa;
  if (!out.kernel.available)
    throw NotImplementedError(fmt::format("{}'s MLA kernel cannot run here for {} activations with kv-cache dtype {}",
                                          group->backend, kernel::to_string(layer.dtype),
                                          cache_dtype_name(layer.kv_cache_dtype)));
  if (out.kernel.device != kernel::DeviceKind::cpu)
    throw NotImplementedError(fmt::format("{}'s MLA kernel runs on the GPU; attnsel run and bench drive MLA kernels "
                                          "that run on the host (CPU_MLA)",
                                          group->backend));
  out.make_impl = [cls](const kernel::MlaLayerParams& p) { return cls->make_mla_impl(p); };
  return out;
}

std::string describe_mla(const MlaShape& s) {
  std::string scale = fmt::format("{}^-0.5", s.qk_head_size());
  if (s.rope_type == "deepseek_yarn" && s.yarn_mscale != 1.0)
    scale += fmt::format(" · m², yarn m = {:.6f}", s.yarn_mscale);
  return fmt::format("kv_lora_rank {}, qk_rope_head_dim {}, qk_nope_head_dim {}, v_head_dim {}; softmax scale {:.10f} "
                     "({})",
                     s.kv_lora_rank, s.qk_rope_head_dim, s.qk_nope_head_dim, s.v_head_dim, s.softmax_scale, scale);
}

}  // namespace attnsel::cli

// The runtime facts a plan derives from the model and the engine options: capability rules
// read them from vLLM's global config (model_config, attention_config, parallel_config).
#include <fmt/format.h>

#include "attnsel/plan.hpp"

namespace attnsel {

std::vector<std::string> plan_facts(const ModelSpec& model, const EngineOptions& options) {
  const ModelSpec sharded = shard_model(model, options.tensor_parallel_size);
  std::vector<std::string> facts;
  auto set = [&](std::string_view name, auto value) { facts.push_back(fmt::format("{}={}", name, value)); };

  // vLLM's model_config.get_head_size() / get_num_attention_heads() describe the model's
  // (first) attention layer.
  const AttentionLayerSpec* first = nullptr;
  bool softcap = false;
  for (const LayerSpec& l : sharded.layers) {
    if (l.mixer != MixerKind::attention || !l.attention) continue;
    if (!first) first = &*l.attention;
    softcap = softcap || l.attention->logits_soft_cap.has_value();
    if (l.attention->mla) set("model.qk_nope_head_dim", l.attention->mla->qk_nope_head_dim);
    if (l.attention->index_topk) set("model.index_topk", *l.attention->index_topk);
    if (l.attention->mla || l.attention->index_topk) break;  // MLA models: every layer alike
  }
  if (first) {
    set("model.head_size", first->head_size);
    set("model.num_attention_heads", first->num_heads);
    set("model.num_kv_heads", first->num_kv_heads);
  }
  set("model.is_mm_prefix_lm", model.is_mm_prefix_lm ? "true" : "false");
  set("model.attn_logit_softcapping", softcap ? "true" : "false");

  const AttentionConfig& ac = options.engine.attention;
  set("flash_attn_version", ac.flash_attn_version.value_or(0));
  set("flashinfer.use_trtllm_attention",
      ac.use_trtllm_attention ? (*ac.use_trtllm_attention ? "true" : "false") : "auto");
  set("parallel.decode_context_parallel_size", options.engine.decode_context_parallel_size);
  set("kv_connector.configured", options.engine.kv_transfer_instance ? "true" : "false");
  set("env.vllm_batch_invariant", options.engine.batch_invariant ? "true" : "false");
  return facts;
}

std::shared_ptr<Platform> make_plan_platform(const ModelSpec& model, const EngineOptions& options,
                                             std::string_view platform_spec,
                                             const std::vector<std::string>& user_facts,
                                             std::optional<SelectionMode> mode) {
  std::vector<std::string> facts = plan_facts(model, options);
  facts.insert(facts.end(), user_facts.begin(), user_facts.end());
  if (platform_spec.empty()) return detect_host_platform(facts, mode);
  return make_platform(platform_spec, facts, mode);
}

}  // namespace attnsel

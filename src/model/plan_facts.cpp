// The runtime facts a plan derives from the model: capability rules read them from vLLM's
// model_config. The engine options' facts (attention_config, parallel_config, ...) come
// from with_engine, as for every other selection (attnsel/engine_facts.hpp).
#include <fmt/format.h>

#include "attnsel/engine_facts.hpp"
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
  return facts;
}

std::shared_ptr<const Platform> make_plan_platform(const ModelSpec& model, const EngineOptions& options,
                                                   std::optional<std::string_view> platform_spec,
                                             const std::vector<std::string>& user_facts,
                                             std::optional<SelectionMode> mode) {
  std::vector<std::string> facts = plan_facts(model, options);
  facts.insert(facts.end(), user_facts.begin(), user_facts.end());
  const std::shared_ptr<Platform> platform =
      platform_spec ? make_platform(*platform_spec, facts, mode) : detect_host_platform(facts, mode);
  return with_engine(platform, options.engine);
}

}  // namespace attnsel

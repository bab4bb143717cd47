#include "model/model_hooks.hpp"

#include <algorithm>

namespace attnsel::model {

EngineOptions apply_model_hooks(const ModelSpec& model, const EngineOptions& options, std::vector<LogLine>& logs) {
  EngineOptions out = options;
  // DeepseekV32ForCausalLM: a bfloat16 KV cache is the model's own dtype, spelled "auto".
  const bool sparse_mla = std::any_of(model.layers.begin(), model.layers.end(),
                                      [](const LayerSpec& l) { return l.attention && l.attention->index_topk; });
  if (sparse_mla && out.engine.cache.cache_dtype == CacheDType::bfloat16) {
    out.engine.cache.cache_dtype = CacheDType::auto_;
    logs.push_back({LogLine::Level::info, "Using bfloat16 kv-cache for DeepSeekV3.2"});
  }
  return out;
}

}  // namespace attnsel::model

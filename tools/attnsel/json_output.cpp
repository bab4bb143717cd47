#include "json_output.hpp"

#include <cstdio>

namespace attnsel::cli {

nlohmann::ordered_json to_json(const AttentionSelectorConfig& c) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["head_size"] = c.head_size;
  j["dtype"] = std::string(dtype_name(c.dtype));
  j["kv_cache_dtype"] = c.kv_cache_dtype ? nlohmann::ordered_json(*c.kv_cache_dtype) : nlohmann::ordered_json(nullptr);
  j["block_size"] = c.block_size ? nlohmann::ordered_json(*c.block_size) : nlohmann::ordered_json(nullptr);
  j["use_mla"] = c.use_mla;
  j["has_sink"] = c.has_sink;
  j["use_sparse"] = c.use_sparse;
  j["use_mm_prefix"] = c.use_mm_prefix;
  j["use_per_head_quant_scales"] = c.use_per_head_quant_scales;
  j["attn_type"] = std::string(attn_type_name(c.attn_type));
  j["has_sliding_window"] = c.has_sliding_window;
  j["use_non_causal"] = c.use_non_causal;
  j["use_batch_invariant"] = c.use_batch_invariant;
  j["use_kv_connector"] = c.use_kv_connector;
  j["use_pcp"] = c.use_pcp;
  j["use_adaptive_verification"] = c.use_adaptive_verification;
  j["use_dcp"] = c.use_dcp;
  j["use_rswa"] = c.use_rswa;
  return j;
}

nlohmann::ordered_json to_json(const std::vector<Candidate>& candidates) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Candidate& c : candidates)
    out.push_back({{"backend", c.backend}, {"priority", c.priority}, {"valid", c.valid}, {"reasons", c.reasons}});
  return out;
}

nlohmann::ordered_json failure_json(const std::string& message, const std::string& error_type,
                            const std::vector<Candidate>& candidates) {
  return {{"error", message}, {"error_type", error_type}, {"candidates", to_json(candidates)}};
}

void print_json(const nlohmann::ordered_json& j) {
  // Replace rather than throw on invalid UTF-8: a plugin's name must never crash the CLI.
  const std::string text = j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
}

}  // namespace attnsel::cli

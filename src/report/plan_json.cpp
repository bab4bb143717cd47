#include "report/plan_json.hpp"

#include "report/selection_json.hpp"

namespace attnsel::report {

namespace {

nlohmann::json opt(const std::optional<std::int64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
nlohmann::json opt(const std::optional<int>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
nlohmann::json opt(const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json opt(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// An MLA group's widths, heads per rank and softmax scale (null for other groups).
nlohmann::json mla_json(const PlanGroup& g) {
  if (!g.mla) return nullptr;
  const MlaShape& m = *g.mla;
  return {{"num_heads", g.request ? opt(g.request->num_heads) : nlohmann::json(nullptr)},
          {"kv_lora_rank", m.kv_lora_rank},
          {"qk_rope_head_dim", m.qk_rope_head_dim},
          {"qk_nope_head_dim", m.qk_nope_head_dim},
          {"v_head_dim", m.v_head_dim},
          {"q_lora_rank", opt(m.q_lora_rank)},
          {"latent_size", m.latent_size()},
          {"qk_head_size", m.qk_head_size()},
          {"softmax_scale", m.softmax_scale},
          {"rope_type", m.rope_type},
          {"rope_factor", opt(m.rope_factor)},
          {"mscale_all_dim", m.mscale_all_dim},
          {"yarn_mscale", m.yarn_mscale}};
}

nlohmann::json group_json(const ModelPlan& plan, const PlanGroup& g) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerRef& r : g.layers) layers.push_back(r.index);
  nlohmann::json j = {
      {"layers", g.layers_text},
      {"layer_indices", layers},
      {"stack", g.layers.front().stack},
      {"role", g.layers.front().role},
      {"mixer", std::string(mixer_kind_name(g.mixer))},
      {"kind", std::string(kind_value(g.kind))},
      {"attn_type", g.mixer == MixerKind::mamba ? nlohmann::json(nullptr) : nlohmann::json(attn_type_name(g.attn_type))},
      {"backend", g.error ? nlohmann::json(nullptr) : nlohmann::json(g.backend)},
      {"class", g.error ? nlohmann::json(nullptr) : nlohmann::json(g.class_path)},
      {"requested", opt(g.requested_backend)},
      {"request_source", g.request_source},
      {"config", g.config ? nlohmann::json(to_json(*g.config)) : nlohmann::json(nullptr)},
      {"num_heads", g.request ? opt(g.request->num_heads) : nlohmann::json(nullptr)},
      {"candidates", to_json(g.selection ? g.selection->candidates : g.failed_candidates)},
      {"warnings", g.selection ? g.selection->warnings() : std::vector<std::string>{}},
      {"has_kv_cache", g.has_kv_cache},
      {"num_kv_heads", g.mixer == MixerKind::mamba ? nlohmann::json(nullptr) : nlohmann::json(g.num_kv_heads)},
      {"head_size", g.mixer == MixerKind::mamba ? nlohmann::json(nullptr) : nlohmann::json(g.head_size)},
      {"sliding_window", opt(g.sliding_window)},
      {"block_size", g.has_kv_cache && !g.error && !plan.block_size.source.empty()
                         ? nlohmann::json(plan.block_size.block_size)
                         : nlohmann::json(nullptr)},
      {"kernel_block_size", opt(g.kernel_block_size)},
      {"kv_bytes_per_token_per_layer", opt(g.kv_bytes_per_token)},
      {"state_bytes_per_sequence_per_layer", opt(g.state_bytes_per_sequence)},
      {"mla", mla_json(g)},
      {"notes", g.notes},
      {"error", opt(g.error)},
  };
  return j;
}

}  // namespace

nlohmann::json plan_json(const ModelSpec& model, const ModelPlan& plan) {
  nlohmann::json groups = nlohmann::json::array();
  for (const PlanGroup& g : plan.groups) groups.push_back(group_json(plan, g));
  nlohmann::json layout = nullptr;
  if (plan.layout) {
    std::vector<std::string> candidates;
    for (KVCacheLayout l : plan.layout->candidates) candidates.emplace_back(layout_name(l));
    layout = {{"value", std::string(layout_name(plan.layout->layout))},
              {"candidates", candidates},
              {"mixed_hnc_shapes", plan.layout->mixed_hnc_shapes},
              {"decided_by", plan.layout->decided_by}};
  }
  std::vector<std::string> warnings;
  for (const LogLine& l : plan.logs)
    if (l.level == LogLine::Level::warning) warnings.push_back(l.text);
  return {{"model",
           {{"source", model.source},
            {"model_type", model.model_type},
            {"architecture", model.architecture},
            {"num_hidden_layers", model.num_hidden_layers}}},
          {"platform", plan.platform},
          {"mode", std::string(mode_name(plan.mode))},
          {"dtype", std::string(dtype_name(plan.dtype))},
          {"kv_cache_dtype", std::string(cache_dtype_name(plan.kv_cache_dtype))},
          {"tensor_parallel_size", plan.tensor_parallel_size},
          {"groups", groups},
          {"block_size", plan.block_size.source.empty()
                             ? nlohmann::json(nullptr)
                             : nlohmann::json{{"value", plan.block_size.block_size},
                                              {"user_specified", plan.block_size.user_specified},
                                              {"source", plan.block_size.source},
                                              {"raised_from", opt(plan.block_size.raised_from)},
                                              {"mamba_page_bytes", opt(plan.block_size.mamba_page_bytes)},
                                              {"mamba_page_padded", opt(plan.block_size.mamba_page_padded)}}},
          {"layout", layout},
          {"kv_bytes_per_token", opt(plan.kv_bytes_per_token)},
          {"cross_kv_bytes_per_encoder_token", opt(plan.cross_kv_bytes_per_encoder_token)},
          {"state_bytes_per_sequence", opt(plan.state_bytes_per_sequence)},
          {"distinct_selections", plan.distinct_selections},
          {"warnings", warnings}};
}

}  // namespace attnsel::report

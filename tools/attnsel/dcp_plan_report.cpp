#include "dcp_plan_report.hpp"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "attnsel/errors.hpp"
#include "distributed/dcp_layout.hpp"

namespace attnsel::cli {

namespace {

struct RankShare {
  std::int64_t tokens = 0;
  std::optional<std::int64_t> bytes;
};

struct DcpFacts {
  std::vector<RankShare> ranks;
  std::vector<std::string> problems;  ///< what vLLM would refuse
};

DcpFacts facts(const ModelSpec& model, const ModelPlan& plan, const DcpPlanRequest& r) {
  DcpFacts f;
  std::optional<distributed::DcpLayout> layout;
  try {
    layout = distributed::make_dcp_layout(r.size, r.interleave,
                                          plan.block_size.source.empty() ? r.interleave : plan.block_size.block_size);
  } catch (const ValueError& e) {
    f.problems.emplace_back(e.what());
    layout = distributed::DcpLayout{r.size, r.interleave};
  }
  // The head rules apply to the model's totals (vllm/config/model.py), on its attention layers.
  for (const LayerSpec& layer : model.layers) {
    if (!layer.attention || layer.attention->num_kv_heads <= 0 || layer.attention->num_heads <= 0) continue;
    const AttentionLayerSpec& a = *layer.attention;
    if (auto v = distributed::model_dcp_violation(a.num_heads, a.num_kv_heads, a.use_mla, plan.tensor_parallel_size,
                                                  r.size))
      f.problems.push_back(*v);
    break;
  }
  for (int rank = 0; rank < r.size; ++rank) {
    RankShare s;
    s.tokens = layout->local_seq_len(r.seq_len, rank);
    if (plan.kv_bytes_per_token) s.bytes = s.tokens * *plan.kv_bytes_per_token;
    f.ranks.push_back(s);
  }
  return f;
}

std::string thousands(std::int64_t v) {
  std::string digits = std::to_string(v), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

std::string render_dcp_text(const ModelSpec& model, const ModelPlan& plan, const DcpPlanRequest& r) {
  if (r.size <= 1) return {};
  const DcpFacts f = facts(model, plan, r);
  std::string out = fmt::format("DCP:        {} ranks, interleave {}: token i of a sequence is cached on rank (i / {}) "
                                "% {}; one {}-token sequence (--max-model-len):\n",
                                r.size, r.interleave, r.interleave, r.size, thousands(r.seq_len));
  for (std::size_t i = 0; i < f.ranks.size(); ++i)
    out += fmt::format("  rank {}:   {} tokens{}\n", i, thousands(f.ranks[i].tokens),
                       f.ranks[i].bytes ? fmt::format(", {} bytes of KV cache (all layers)", thousands(*f.ranks[i].bytes))
                                        : std::string(", bytes not modelled for this kv-cache dtype"));
  for (const std::string& p : f.problems) out += fmt::format("Warning:    vLLM refuses this DCP configuration: {}\n", p);
  return out;
}

nlohmann::json dcp_json(const ModelSpec& model, const ModelPlan& plan, const DcpPlanRequest& r) {
  if (r.size <= 1) return nullptr;
  const DcpFacts f = facts(model, plan, r);
  nlohmann::json ranks = nlohmann::json::array();
  for (std::size_t i = 0; i < f.ranks.size(); ++i)
    ranks.push_back({{"rank", i},
                     {"tokens", f.ranks[i].tokens},
                     {"kv_cache_bytes", f.ranks[i].bytes ? nlohmann::json(*f.ranks[i].bytes) : nlohmann::json(nullptr)}});
  return {{"decode_context_parallel_size", r.size},
          {"cp_kv_cache_interleave_size", r.interleave},
          {"seq_len", r.seq_len},
          {"ranks", ranks},
          {"problems", f.problems}};
}

}  // namespace attnsel::cli

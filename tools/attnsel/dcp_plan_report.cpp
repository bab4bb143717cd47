#include "dcp_plan_report.hpp"

#include <fmt/format.h>

#include <limits>
#include <optional>
#include <vector>

#include "attnsel/errors.hpp"
#include "core/checked_math.hpp"
#include "distributed/dcp_layout.hpp"

namespace attnsel::cli {

namespace {

struct RankShare {
  std::int64_t tokens = 0;
  std::optional<std::int64_t> bytes;
};

// Each rank's share of one --max-model-len sequence (for a configuration vLLM accepts).
std::vector<RankShare> rank_shares(const ModelPlan& plan, const DcpPlanRequest& r) {
  const distributed::DcpLayout layout{r.size, r.interleave};
  std::vector<RankShare> ranks;
  for (int rank = 0; rank < r.size; ++rank) {
    RankShare s;
    s.tokens = layout.local_seq_len(r.seq_len, rank);
    if (plan.kv_bytes_per_token) {
      s.bytes = checked::mul(s.tokens, *plan.kv_bytes_per_token);
      if (!s.bytes)
        throw ValueError(fmt::format("--max-model-len {}: rank {}'s {} tokens at {} bytes per token are more than {} "
                                     "bytes of KV cache",
                                     r.seq_len, rank, s.tokens, *plan.kv_bytes_per_token,
                                     std::numeric_limits<std::int64_t>::max()));
    }
    ranks.push_back(s);
  }
  return ranks;
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

std::optional<std::string> dcp_head_problem(const ModelSpec& model, int tensor_parallel_size, const DcpPlanRequest& r) {
  // The head rules apply to the model's totals (vllm/config/model.py), on its attention layers.
  for (const LayerSpec& layer : model.layers) {
    if (!layer.attention || layer.attention->num_kv_heads <= 0 || layer.attention->num_heads <= 0) continue;
    const AttentionLayerSpec& a = *layer.attention;
    return distributed::model_dcp_violation(a.num_heads, a.num_kv_heads, a.use_mla, tensor_parallel_size, r.size);
  }
  return std::nullopt;
}

void check_dcp_plan(const ModelPlan& plan, const DcpPlanRequest& r) {
  if (r.size <= 1) return;
  try {
    (void)distributed::make_dcp_layout(r.size, r.interleave, plan.block_size.block_size);
  } catch (const ValueError& e) {
    throw ValueError(fmt::format("vLLM refuses this DCP configuration: {}", e.what()));
  }
  (void)rank_shares(plan, r);
}

std::string render_dcp_text(const ModelSpec&, const ModelPlan& plan, const DcpPlanRequest& r) {
  if (r.size <= 1) return {};
  const std::vector<RankShare> ranks = rank_shares(plan, r);
  std::string out = fmt::format("DCP:        {} ranks, interleave {}: token i of a sequence is cached on rank (i / {}) "
                                "% {}; one {}-token sequence (--max-model-len):\n",
                                r.size, r.interleave, r.interleave, r.size, thousands(r.seq_len));
  for (std::size_t i = 0; i < ranks.size(); ++i)
    out += fmt::format("  rank {}:   {} tokens{}\n", i, thousands(ranks[i].tokens),
                       ranks[i].bytes ? fmt::format(", {} bytes of KV cache (all layers)", thousands(*ranks[i].bytes))
                                      : std::string(", bytes not modelled for this kv-cache dtype"));
  return out;
}

nlohmann::json dcp_json(const ModelSpec&, const ModelPlan& plan, const DcpPlanRequest& r) {
  if (r.size <= 1) return nullptr;
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankShare& s : rank_shares(plan, r))
    ranks.push_back({{"rank", ranks.size()},
                     {"tokens", s.tokens},
                     {"kv_cache_bytes", s.bytes ? nlohmann::json(*s.bytes) : nlohmann::json(nullptr)}});
  return {{"decode_context_parallel_size", r.size},
          {"cp_kv_cache_interleave_size", r.interleave},
          {"seq_len", r.seq_len},
          {"ranks", ranks}};
}

}  // namespace attnsel::cli

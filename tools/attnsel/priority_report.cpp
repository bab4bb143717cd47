#include "priority_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "json_output.hpp"

namespace attnsel::cli {

namespace {

struct MainConfiguration {
  const char* label;
  AttentionSelectorConfig config;
  std::optional<int> num_heads;
};

AttentionSelectorConfig dense(int head_size, DType dtype = DType::bfloat16) {
  AttentionSelectorConfig c;
  c.head_size = head_size;
  c.dtype = dtype;
  return c;
}

AttentionSelectorConfig mla(bool sparse, std::optional<CacheDType> kv = std::nullopt) {
  AttentionSelectorConfig c = dense(576);
  c.use_mla = true;
  c.use_sparse = sparse;
  c.kv_cache_dtype = kv;
  return c;
}

// The configurations whose lists differ somewhere (the platforms' priority lists in vllm/platforms/): dense causal and
// non-causal, multimodal prefix, fp32, a TurboQuant cache, dense MLA, and sparse MLA with
// few heads, many heads and an fp8 cache.
std::vector<MainConfiguration> main_configurations() {
  std::vector<MainConfiguration> out;
  out.push_back({"dense decoder, head 128, bfloat16", dense(128), std::nullopt});
  AttentionSelectorConfig non_causal = dense(128);
  non_causal.use_non_causal = true;
  out.push_back({"dense non-causal, head 128", non_causal, std::nullopt});
  AttentionSelectorConfig mm_prefix = dense(256);
  mm_prefix.use_mm_prefix = true;
  out.push_back({"multimodal prefix, head 256", mm_prefix, std::nullopt});
  out.push_back({"dense decoder, head 128, float32", dense(128, DType::float32), std::nullopt});
  AttentionSelectorConfig turboquant = dense(128);
  turboquant.kv_cache_dtype = CacheDType::turboquant_k8v4;
  out.push_back({"dense decoder, head 128, kv turboquant_k8v4", turboquant, std::nullopt});
  out.push_back({"MLA, head 576", mla(false), std::nullopt});
  out.push_back({"sparse MLA, head 576, 128 heads", mla(true), 128});
  out.push_back({"sparse MLA, head 576, 16 heads", mla(true), 16});
  out.push_back({"sparse MLA, head 576, 128 heads, kv fp8", mla(true, CacheDType::fp8), 128});
  return out;
}

}  // namespace

std::vector<PriorityReport> report_priorities(const Platform& platform) {
  std::vector<PriorityReport> out;
  for (const MainConfiguration& m : main_configurations()) {
    PriorityReport r{m.label, m.config, m.num_heads, {}, {}, {}};
    try {
      for (const BackendMember& b : platform.backend_priorities(m.config, m.num_heads)) r.priorities.push_back(b.name());
      r.chosen = platform.get_attn_backend_cls(std::nullopt, m.config, m.num_heads).backend;
    } catch (const Error& e) {
      r.error = fmt::format("{}: {}", error_kind_name(e.kind()), e.what());
    }
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::ordered_json to_json(const PriorityReport& r) {
  return {{"configuration", r.label},
          {"config", to_json(r.config)},
          {"num_heads", r.num_heads ? nlohmann::ordered_json(*r.num_heads) : nlohmann::ordered_json(nullptr)},
          {"priorities", r.priorities},
          {"chosen", r.chosen.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.chosen)},
          {"error", r.error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.error)}};
}

namespace {
std::string list_or_routed(const std::vector<std::string>& priorities) {
  return priorities.empty() ? std::string("(routed without a priority list)")
                            : fmt::format("{}", fmt::join(priorities, ", "));
}
std::string outcome(const PriorityReport& r) {
  return r.error.empty() ? r.chosen : fmt::format("none: {}", r.error);
}
// Selection errors quote the whole config; in a table cell the first sentence is enough.
std::string first_sentence(const std::string& s) {
  const std::size_t cut = s.find(" with AttentionSelectorConfig(");
  return cut == std::string::npos ? s : s.substr(0, cut) + " (see `attnsel select`)";
}
}  // namespace

std::string render_text(const Platform& platform, const std::vector<PriorityReport>& reports) {
  std::string out = fmt::format("Automatic priority lists on {}:\n", platform.describe());
  for (const PriorityReport& r : reports) {
    out += fmt::format("\n  {}\n", r.label);
    out += fmt::format("    priorities: {}\n", list_or_routed(r.priorities));
    out += fmt::format("    chosen:     {}\n", outcome(r));
  }
  return out;
}

std::string render_markdown(const Platform& platform, const std::vector<PriorityReport>& reports) {
  std::string out = fmt::format("## `{}`\n\n| Configuration | Priority list (highest first) | Automatic choice |\n"
                                "|---|---|---|\n",
                                platform.spec());
  for (const PriorityReport& r : reports) {
    std::string choice = r.error.empty() ? fmt::format("**{}**", r.chosen) : first_sentence(r.error);
    for (char& ch : choice)
      if (ch == '|') ch = '/';
    out += fmt::format("| {} | {} | {} |\n", r.label, list_or_routed(r.priorities), choice);
  }
  return out;
}

}  // namespace attnsel::cli

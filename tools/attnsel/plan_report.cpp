#include "plan_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>

#include "json_output.hpp"

namespace attnsel::cli {

namespace {

// A plain text table: columns padded to their widest cell (cells are ASCII or counted by
// code points for the few non-ASCII marks we print).
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  std::string render() const {
    std::vector<std::size_t> width;
    for (const auto& r : rows_)
      for (std::size_t i = 0; i < r.size(); ++i) {
        if (width.size() <= i) width.push_back(0);
        width[i] = std::max(width[i], display_width(r[i]));
      }
    std::string out;
    for (const auto& r : rows_) {
      std::string line;
      for (std::size_t i = 0; i < r.size(); ++i) {
        line += r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - display_width(r[i]) + 2, ' ');
      }
      out += line + "\n";
    }
    return out;
  }

 private:
  static std::size_t display_width(const std::string& s) {
    std::size_t n = 0;
    for (unsigned char c : s) n += (c & 0xC0) != 0x80;  // count UTF-8 lead bytes only
    return n;
  }
  std::vector<std::vector<std::string>> rows_;
};

std::string type_column(const PlanGroup& g) {
  if (g.mixer == MixerKind::attention) return std::string(attn_type_name(g.attn_type));
  return std::string(mixer_kind_name(g.mixer));
}

std::string backend_column(const PlanGroup& g) { return g.error ? "\u2717 none valid" : g.backend; }

std::string block_column(const ModelPlan& plan, const PlanGroup& g) {
  if (!g.has_kv_cache || g.error || plan.block_size.source.empty()) return "-";
  const int bs = plan.block_size.block_size;
  // A chosen size without a kernel size: this group's backends cannot use it.
  if (!g.kernel_block_size) return fmt::format("{} \u2717", bs);
  if (*g.kernel_block_size != bs) return fmt::format("{} (kernel {})", bs, *g.kernel_block_size);
  return fmt::format("{}", bs);
}

std::string layout_column(const ModelPlan& plan, const PlanGroup& g) {
  if (!g.has_kv_cache || !plan.layout) return "-";
  return std::string(layout_name(plan.layout->layout));
}

std::string cache_column(const PlanGroup& g) {
  if (g.mixer == MixerKind::mamba)
    return g.state_bytes_per_sequence ? fmt::format("{} B/seq", with_thousands(*g.state_bytes_per_sequence)) : "?";
  if (!g.has_kv_cache) return "none";
  return g.kv_bytes_per_token ? fmt::format("{} B/token", with_thousands(*g.kv_bytes_per_token)) : "not modelled";
}

// An MLA group's shape per rank and its softmax scale, with where the scale comes from.
std::string mla_text(const PlanGroup& g) {
  const MlaShape& m = *g.mla;
  const std::string heads =
      g.request && g.request->num_heads ? fmt::format("{} heads per rank, ", *g.request->num_heads) : "";
  const std::string origin =
      m.rope_type == "deepseek_yarn"
          ? fmt::format("{}^-0.5 x {:.8g}^2 (deepseek_yarn, factor {:g}, mscale_all_dim {:g})", m.qk_head_size(),
                        m.yarn_mscale, m.rope_factor.value_or(1.0), m.mscale_all_dim)
          : fmt::format("{}^-0.5 (rope type {})", m.qk_head_size(), m.rope_type);
  return fmt::format("{}latent {} ({} + {}), q/k {} ({} + {}), v {}; softmax scale {:.11g} = {}", heads,
                     m.latent_size(), m.kv_lora_rank, m.qk_rope_head_dim, m.qk_head_size(), m.qk_nope_head_dim,
                     m.qk_rope_head_dim, m.v_head_dim, m.softmax_scale, origin);
}

std::string model_line(const ModelSpec& model) {
  std::string arch = model.architecture.empty() ? "" : ", " + model.architecture;
  return fmt::format("{} ({}{})", model.source, model.model_type, arch);
}

std::string engine_line(const ModelSpec& model, const ModelPlan& plan) {
  std::string dtype(dtype_name(plan.dtype));
  if (model.config_dtype_float32 && plan.dtype != DType::float32) dtype += " (config: float32)";
  else if (!model.config_dtype && plan.dtype != DType::float32) dtype += " (config: none)";
  return fmt::format("dtype {}, kv-cache dtype {}, tensor parallel size {}", dtype,
                     cache_dtype_name(plan.kv_cache_dtype), plan.tensor_parallel_size);
}

std::string summary(const ModelPlan& plan) {
  std::string out;
  if (plan.block_size.source.empty())
    out += "Block size: not chosen (a group of layers has no backend)\n";
  else
    out += fmt::format("Block size: {} ({}{})\n", plan.block_size.block_size, plan.block_size.source,
                       plan.block_size.raised_from
                           ? fmt::format("; raised from {} to hold a Mamba state page", *plan.block_size.raised_from)
                           : "");
  if (plan.layout)
    out += fmt::format("KV layout:  {} ({}{})\n", layout_name(plan.layout->layout),
                       plan.layout->decided_by == "first candidate"
                           ? fmt::format("first of {}", layout_names_repr(plan.layout->candidates))
                           : plan.layout->decided_by,
                       plan.layout->mixed_hnc_shapes ? "; mixed cache shapes need a block-compact layout" : "");
  if (plan.kv_bytes_per_token)
    out += fmt::format("KV cache:   {} bytes per token per rank\n", with_thousands(*plan.kv_bytes_per_token));
  else
    out += fmt::format("KV cache:   not modelled for --kv-cache-dtype {}\n", cache_dtype_name(plan.kv_cache_dtype));
  for (const PlanGroup& g : plan.groups)
    if (g.mla) out += fmt::format("MLA:        layers {}: {}\n", g.layers_text, mla_text(g));
  if (plan.cross_kv_bytes_per_encoder_token)
    out += fmt::format("Cross KV:   {} bytes per encoder token per rank\n",
                       with_thousands(*plan.cross_kv_bytes_per_encoder_token));
  if (plan.state_bytes_per_sequence)
    out += fmt::format("Mamba state: {} bytes per sequence per rank\n", with_thousands(*plan.state_bytes_per_sequence));
  if (plan.block_size.mamba_page_padded)
    out += fmt::format("Mamba page: {} bytes per layer, padded to the attention page of {}\n",
                       with_thousands(*plan.block_size.mamba_page_bytes),
                       with_thousands(*plan.block_size.mamba_page_padded));
  for (const LogLine& l : plan.logs)
    if (l.level == LogLine::Level::warning) out += fmt::format("Warning:    {}\n", l.text);
  return out;
}

std::string candidates_text(const std::vector<Candidate>& candidates, const std::string& indent) {
  std::string out;
  for (const Candidate& c : candidates) {
    if (c.valid)
      out += fmt::format("{}[{}] \u2713 {}\n", indent, c.priority, c.backend);
    else
      out += fmt::format("{}[{}] \u2717 {}: {}\n", indent, c.priority, c.backend, fmt::join(c.reasons, "; "));
  }
  return out;
}

}  // namespace

std::string with_thousands(std::int64_t n) {
  std::string digits = fmt::format("{}", n < 0 ? -n : n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string render_plan_text(const ModelSpec& model, const ModelPlan& plan) {
  std::string out;
  out += fmt::format("Model:      {}\n", model_line(model));
  out += fmt::format("Platform:   {}\n", plan.platform_description);
  out += fmt::format("Engine:     {}\n\n", engine_line(model, plan));
  Table t({"Layers", "Kind", "Type", "Backend", "Block", "Layout", "Cache per layer"});
  for (const PlanGroup& g : plan.groups)
    t.add({g.layers_text, std::string(kind_value(g.kind)), type_column(g), backend_column(g), block_column(plan, g),
           layout_column(plan, g), cache_column(g)});
  out += t.render() + "\n";
  out += summary(plan);
  return out;
}

std::string render_plan_explanation(const ModelPlan& plan) {
  std::string out;
  int n = 0;
  for (const PlanGroup& g : plan.groups) {
    out += fmt::format("[{}] layers {}: {} ({}, {} layer{})\n", ++n, g.layers_text, kind_value(g.kind), type_column(g),
                       g.layers.size(), g.layers.size() == 1 ? "" : "s");
    if (g.mixer == MixerKind::mamba) {
      out += "    Mamba-like layer: vLLM's get_mamba_attn_backend (no platform list, no validation)\n";
    } else if (g.mixer == MixerKind::indexer) {
      out += "    indexer cache: the model fixes its backend (no selection)\n";
    } else if (!g.request) {
      out += "    the layer brings its own backend: vLLM's Attention(attn_backend=...) skips selection\n";
    } else {
      out += fmt::format("    config:     {}\n", g.config->repr());
      if (g.request->num_heads) out += fmt::format("    num_heads:  {}\n", *g.request->num_heads);
      out += fmt::format("    requested:  {}\n",
                         g.requested_backend ? fmt::format("{} ({}; explicit, no fallback)", *g.requested_backend,
                                                           g.request_source)
                                             : std::string("automatic (the platform's priority order)"));
      const auto& candidates = g.selection ? g.selection->candidates : g.failed_candidates;
      if (!candidates.empty()) out += "    candidates:\n" + candidates_text(candidates, "      ");
      if (g.selection)
        for (const std::string& w : g.selection->warnings()) out += fmt::format("    warning:    {}\n", w);
    }
    if (g.error) {
      out += fmt::format("    error:      {}\n", *g.error);
    } else {
      const std::string priority =
          g.selection && g.selection->priority ? fmt::format(", priority {}", *g.selection->priority) : "";
      out += fmt::format("    chosen:     {} ({}{})\n", g.backend, g.class_path, priority);
    }
    if (g.has_kv_cache && !g.error) {
      out += fmt::format("    cache:      {} KV head{} x {} x {} state{} per token{}\n", g.num_kv_heads,
                         g.num_kv_heads == 1 ? "" : "s", g.head_size, g.num_states, g.num_states == 1 ? "" : "s",
                         g.kv_bytes_per_token ? fmt::format(" = {} bytes", with_thousands(*g.kv_bytes_per_token)) : "");
      if (g.kernel_block_size)
        out += fmt::format("    block:      {} tokens per block, kernel block {}\n", plan.block_size.block_size,
                           *g.kernel_block_size);
    }
    if (g.mla) out += fmt::format("    mla:        {}\n", mla_text(g));
    if (g.state_bytes_per_sequence)
      out += fmt::format("    state:      {} bytes per sequence\n", with_thousands(*g.state_bytes_per_sequence));
    if (!g.notes.empty()) out += fmt::format("    notes:      {}\n", fmt::join(g.notes, "; "));
  }
  if (plan.block_size.source.empty()) return out + "\nBlock size and layout: not chosen (a group of layers has no backend).\n";
  out += fmt::format("\nBlock size {}: {}", plan.block_size.block_size, plan.block_size.source);
  if (plan.block_size.user_specified)
    out += " (user-specified, so every selection above validated it)\n";
  else if (plan.block_size.source.starts_with("platform"))
    out += " (the platform sets it when the user gives none)\n";
  else
    out += " (vLLM's update_block_size_for_backend: the first non-SSM backend's preference)\n";
  if (plan.block_size.raised_from)
    out += fmt::format("  Raised from {} so that one attention page holds a Mamba state page ({} bytes per layer).\n",
                       *plan.block_size.raised_from, with_thousands(*plan.block_size.mamba_page_bytes));
  if (plan.block_size.mamba_page_padded)
    out += fmt::format("  The Mamba state page is padded to the attention page: {} bytes.\n",
                       with_thousands(*plan.block_size.mamba_page_padded));
  out += "  Every KV-cache group's kernel accepts it (vLLM's select_common_block_size).\n";
  if (plan.layout) {
    const ResolvedLayout& l = *plan.layout;
    out += fmt::format("KV-cache layout {}: candidates {}{}, decided by the {}.\n", layout_name(l.layout),
                       layout_names_repr(l.candidates),
                       l.mixed_hnc_shapes ? " (block-compact only: the cache specs differ in shape)" : "",
                       l.decided_by == "requested" ? "--kv-cache-layout (VLLM_KV_CACHE_LAYOUT)"
                       : l.decided_by == "connector" ? "KV connector's preference"
                                                     : l.decided_by);
  }
  out += fmt::format("Selections: {} distinct selector configuration{} (each selected once and cached).\n",
                     plan.distinct_selections, plan.distinct_selections == 1 ? "" : "s");
  for (const LogLine& l : plan.logs)
    if (l.level != LogLine::Level::debug)
      out += fmt::format("{}: {}\n", l.level == LogLine::Level::warning ? "Warning" : "Note", l.text);
  return out;
}

std::string render_compare_text(const ModelSpec& model, const std::vector<PlatformOutcome>& outcomes) {
  std::vector<std::string> header = {"Layers", "Kind"};
  for (const PlatformOutcome& o : outcomes) header.push_back(o.platform);
  Table t(header);
  // Groups depend only on the model and the engine options, so every plan has the same rows.
  const ModelPlan* shape = nullptr;
  for (const PlatformOutcome& o : outcomes)
    if (o.plan) shape = &*o.plan;
  if (shape) {
    for (std::size_t i = 0; i < shape->groups.size(); ++i) {
      std::vector<std::string> row = {shape->groups[i].layers_text, std::string(kind_value(shape->groups[i].kind))};
      for (const PlatformOutcome& o : outcomes) {
        if (!o.plan || i >= o.plan->groups.size()) {
          row.push_back("-");
          continue;
        }
        row.push_back(backend_column(o.plan->groups[i]));
      }
      t.add(row);
    }
  }
  auto summary_row = [&](std::string label, auto cell) {
    std::vector<std::string> row = {std::move(label), ""};
    for (const PlatformOutcome& o : outcomes) row.push_back(o.plan && !o.error ? cell(*o.plan) : "-");
    t.add(row);
  };
  summary_row("block size", [](const ModelPlan& p) { return fmt::format("{}", p.block_size.block_size); });
  summary_row("KV layout", [](const ModelPlan& p) {
    return p.layout ? std::string(layout_name(p.layout->layout)) : std::string("-");
  });
  summary_row("KV bytes/token", [](const ModelPlan& p) {
    return p.kv_bytes_per_token ? with_thousands(*p.kv_bytes_per_token) : std::string("?");
  });
  std::string out = fmt::format("Model: {}\n\n", model_line(model)) + t.render();
  for (const PlatformOutcome& o : outcomes)
    if (o.error) out += fmt::format("\n{}: {}\n", o.platform, *o.error);
  return out;
}

nlohmann::json compare_json(const ModelSpec& model, const std::vector<PlatformOutcome>& outcomes) {
  nlohmann::json platforms = nlohmann::json::array();
  for (const PlatformOutcome& o : outcomes) {
    nlohmann::json entry = {{"platform", o.platform}, {"error", o.error ? nlohmann::json(*o.error) : nlohmann::json(nullptr)}};
    entry["plan"] = o.plan ? plan_json(model, *o.plan) : nlohmann::json(nullptr);
    platforms.push_back(entry);
  }
  return {{"model", {{"source", model.source}, {"model_type", model.model_type}}}, {"platforms", platforms}};
}

}  // namespace attnsel::cli

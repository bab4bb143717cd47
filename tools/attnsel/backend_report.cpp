#include "backend_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>


namespace attnsel::cli {

namespace {

std::string join_or(const std::vector<std::string>& v, std::string_view empty) {
  return v.empty() ? std::string(empty) : fmt::format("{}", fmt::join(v, ", "));
}

std::vector<std::string> supported_features(const AttentionCapabilities& c) {
  std::vector<std::string> out;
  for (const auto& [name, on] : c.features)
    if (on) out.push_back(name);
  return out;
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

// Markdown cells must not contain a bare '|'.
std::string cell(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|') out += "\\|";
    else out += ch;
  }
  return out;
}

}  // namespace

std::string render_text(const Platform& platform, const std::vector<BackendReport>& reports) {
  std::string out = fmt::format("Backends registered, with their capabilities on {}:\n", platform.describe());
  EnumKind section = EnumKind::mamba;  // differs from the first report's kind: prints its heading
  for (const BackendReport& r : reports) {
    if (r.kind != section) {
      section = r.kind;
      out += fmt::format("\n{}:\n", enum_class_name(section));
    }
    out += fmt::format("  {}  {}{}{}\n", r.name, r.class_path.value_or("(no class)"),
                       r.overridden ? "  [overridden]" : "", r.has_kernel ? "  [kernel in this build]" : "");
    if (!r.error.empty()) out += fmt::format("      unavailable: {}\n", r.error);
    if (r.mamba_batch_invariance)
      out += fmt::format("      batch invariance: {}\n", yes_no(*r.mamba_batch_invariance));
    if (!r.capabilities) continue;
    const AttentionCapabilities& c = *r.capabilities;
    out += fmt::format("      dtypes: {}; kv-cache dtypes: {}\n", join_or(c.dtypes, "none"),
                       join_or(c.kv_cache_dtypes, "any"));
    out += fmt::format("      kernel block sizes: {}; head sizes: {}\n", join_or(c.kernel_block_sizes, "any"),
                       c.head_sizes);
    out += fmt::format("      attention types: {}; compute capability {}\n", join_or(c.attn_types, "none"),
                       c.compute_capability ? "supported" : "not supported");
    out += fmt::format("      supports: {}\n", join_or(supported_features(c), "-"));
    if (c.kv_cache_layouts) out += fmt::format("      kv-cache layouts: {}\n", join_or(*c.kv_cache_layouts, "none"));
  }
  return out;
}

// The docs must not depend on the build, so whether a kernel is built here is left out.
std::string render_markdown(const Platform& platform, const std::vector<BackendReport>& reports) {
  std::string out = fmt::format("## `{}`\n\n", platform.spec());
  out +=
      "| Backend | Class | dtypes | KV-cache dtypes | kernel block sizes | head sizes | attention types | "
      "compute capability | supports | KV-cache layouts |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n";
  for (const BackendReport& r : reports) {
    if (r.kind != EnumKind::attention) continue;
    const std::string cls = r.class_path ? fmt::format("`{}`", *r.class_path) : "-";
    if (!r.capabilities) {
      out += fmt::format("| {} | {} | {} |  |  |  |  |  |  |  |\n", r.name, cell(cls), cell(r.error));
      continue;
    }
    const AttentionCapabilities& c = *r.capabilities;
    out += fmt::format("| {}{} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r.name,
                       r.overridden ? " (overridden)" : "", cell(cls), join_or(c.dtypes, "none"),
                       join_or(c.kv_cache_dtypes, "any"), join_or(c.kernel_block_sizes, "any"), cell(c.head_sizes),
                       join_or(c.attn_types, "none"), c.compute_capability ? "yes" : "no",
                       join_or(supported_features(c), "-"),
                       c.kv_cache_layouts ? join_or(*c.kv_cache_layouts, "none") : "any");
  }
  out += "\n| Mamba backend | Class | batch invariance |\n|---|---|---|\n";
  for (const BackendReport& r : reports) {
    if (r.kind != EnumKind::mamba) continue;
    const std::string cls = r.class_path ? fmt::format("`{}`", *r.class_path) : "-";
    out += fmt::format("| {}{} | {} | {} |\n", r.name, r.overridden ? " (overridden)" : "",
                       cell(r.error.empty() ? cls : r.error),
                       r.mamba_batch_invariance ? yes_no(*r.mamba_batch_invariance) : "-");
  }
  return out;
}

}  // namespace attnsel::cli

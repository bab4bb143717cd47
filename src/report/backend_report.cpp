#include "report/backend_report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "attnsel/capability_checks.hpp"
#include "attnsel/kv_cache_layout.hpp"

namespace attnsel::report {

namespace {

// Head sizes are probed up to this bound when a backend states a rule instead of a list.
constexpr int kHeadSizeProbeLimit = 1024;

// Summarises the head sizes a rule accepts in [1, kHeadSizeProbeLimit] in words, e.g.
// "multiples of 8 up to 256" or ">= 32".
std::string summarise_head_sizes(const std::vector<int>& accepted) {
  if (accepted.empty()) return "none";
  if (static_cast<int>(accepted.size()) == kHeadSizeProbeLimit) return "any";
  int step = 0;
  for (int h : accepted) step = std::gcd(step, h);
  const int lo = accepted.front();
  const int hi = accepted.back();
  const bool arithmetic = static_cast<int>(accepted.size()) == (hi - lo) / step + 1;
  if (arithmetic && accepted.size() > 2) {
    const bool unbounded = hi + step > kHeadSizeProbeLimit;
    if (step == 1) return unbounded ? fmt::format(">= {}", lo) : fmt::format("{}-{}", lo, hi);
    std::string out = fmt::format("multiples of {}", step);
    if (lo != step) out += fmt::format(" from {}", lo);
    if (!unbounded) out += fmt::format(" up to {}", hi);
    return out;
  }
  return fmt::format("{}", fmt::join(accepted, ", "));
}

std::string head_sizes_of(const BackendCapabilities& c) {
  if (!c.head_sizes.empty()) return fmt::format("{}", fmt::join(c.head_sizes, ", "));
  std::vector<int> accepted;
  for (int h = 1; h <= kHeadSizeProbeLimit; ++h)
    if (c.supports_head_size(h)) accepted.push_back(h);
  return summarise_head_sizes(accepted);
}

AttentionCapabilities capabilities_of(const AttentionBackend& b, const Platform& platform) {
  const BackendCapabilities record = b.capabilities(platform.env());
  AttentionCapabilities c;
  for (DType d : record.dtypes) c.dtypes.emplace_back(dtype_name(d));
  for (CacheDType d : record.kv_cache_dtypes) c.kv_cache_dtypes.emplace_back(cache_dtype_name(d));
  for (const KernelBlockSize& s : record.kernel_block_sizes) c.kernel_block_sizes.push_back(to_string(s));
  c.head_sizes = head_sizes_of(record);
  for (std::size_t i = 0; i < attn_type_names().size(); ++i)
    if (record.supports_attn_type(static_cast<AttentionType>(i))) c.attn_types.emplace_back(attn_type_names()[i]);
  c.compute_capability = record.supports_compute_capability(platform.get_device_capability());
  for (const auto& [name, declared] : capability_flags(record)) c.features.emplace_back(std::string(name), declared);
  if (record.kv_cache_layouts) {
    c.kv_cache_layouts.emplace();
    for (KVCacheLayout l : *record.kv_cache_layouts) c.kv_cache_layouts->emplace_back(layout_name(l));
  }
  return c;
}

}  // namespace

BackendReport report_member(const BackendMember& m, const Platform& platform) {
  BackendReport r;
  r.kind = m.kind();
  r.name = m.name();
  r.overridden = m.is_overridden();
  try {
    r.class_path = m.get_path();
    const std::shared_ptr<const BackendClass> cls = m.get_class();
    if (auto attn = std::dynamic_pointer_cast<const AttentionBackend>(cls)) {
      r.has_kernel = attn->has_kernel();
      r.capabilities = capabilities_of(*attn, platform);
    } else if (auto mamba = std::dynamic_pointer_cast<const MambaBackend>(cls)) {
      r.mamba_batch_invariance = mamba->supports_batch_invariance();
    }
  } catch (const Error& e) {
    // CUSTOM before registration, TORCH_SDPA's empty tag, NO_ATTENTION's missing module,
    // or a plugin class that failed: listed with the reason instead of its capabilities.
    r.error = fmt::format("{}: {}", error_kind_name(e.kind()), e.what());
  }
  return r;
}

std::vector<BackendReport> report_backends(const Platform& platform) {
  std::vector<BackendReport> out;
  for (const BackendEnum* e : {&AttentionBackendEnum, &MambaAttentionBackendEnum})
    for (const BackendMember& m : e->members()) out.push_back(report_member(m, platform));
  return out;
}

nlohmann::ordered_json to_json(const BackendReport& r) {
  nlohmann::ordered_json j = {{"enum", std::string(enum_class_name(r.kind))},
                      {"name", r.name},
                      {"class", r.class_path ? nlohmann::ordered_json(*r.class_path) : nlohmann::ordered_json(nullptr)},
                      {"overridden", r.overridden},
                      {"error", r.error.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.error)},
                      {"has_kernel", r.has_kernel}};
  if (r.capabilities) {
    const AttentionCapabilities& c = *r.capabilities;
    nlohmann::ordered_json features = nlohmann::ordered_json::object();
    for (const auto& [name, on] : c.features) features[name] = on;
    j["capabilities"] = {
        {"dtypes", c.dtypes},
        {"kv_cache_dtypes", c.kv_cache_dtypes},
        {"kernel_block_sizes", c.kernel_block_sizes},
        {"head_sizes", c.head_sizes},
        {"attn_types", c.attn_types},
        {"compute_capability", c.compute_capability},
        {"features", features},
        {"kv_cache_layouts", c.kv_cache_layouts ? nlohmann::ordered_json(*c.kv_cache_layouts) : nlohmann::ordered_json(nullptr)}};
  } else {
    j["capabilities"] = nullptr;
  }
  if (r.mamba_batch_invariance) j["supports_batch_invariance"] = *r.mamba_batch_invariance;
  return j;
}

nlohmann::ordered_json backends_json(const Platform& platform, const std::vector<BackendReport>& reports) {
  nlohmann::ordered_json j = {{"platform", platform.spec()},
                              {"mode", std::string(mode_name(platform.mode()))},
                              {"backends", nlohmann::ordered_json::array()}};
  for (const BackendReport& r : reports) j["backends"].push_back(to_json(r));
  return j;
}

}  // namespace attnsel::report

// What the library says about each registered backend: read once from the registry and the
// backend classes' capability queries on one platform (`attnsel list`, the generated docs,
// the C API's listing). Nothing here is written by hand.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnsel/platform.hpp"
#include "attnsel/registry.hpp"

namespace attnsel::report {

/// An attention backend's capabilities on one platform.
struct AttentionCapabilities {
  std::vector<std::string> dtypes;
  std::vector<std::string> kv_cache_dtypes;     ///< empty = any
  std::vector<std::string> kernel_block_sizes;  ///< "16", "MultipleOf(16)"; empty = any
  std::string head_sizes;                       ///< declared list, or a summary of the head-size rule
  std::vector<std::string> attn_types;
  bool compute_capability = false;              ///< the platform's device satisfies the rule
  std::vector<std::pair<std::string, bool>> features;  ///< ("sink", true), ... in the table's order
  std::optional<std::vector<std::string>> kv_cache_layouts;  ///< nullopt = any, no preference
};

/// One enum member and what it resolves to.
struct BackendReport {
  EnumKind kind = EnumKind::attention;
  std::string name;
  std::optional<std::string> class_path;  ///< nullopt when get_path() fails (CUSTOM, TORCH_SDPA)
  bool overridden = false;
  std::string error;                      ///< why the class is not available (get_path/get_class)
  bool has_kernel = false;
  std::optional<AttentionCapabilities> capabilities;  ///< attention classes only
  std::optional<bool> mamba_batch_invariance;         ///< Mamba classes only
};

/// Every member of both enums (dynamic members included), in declaration order.
std::vector<BackendReport> report_backends(const Platform& platform);

nlohmann::ordered_json to_json(const BackendReport& r);
/// One member's report (its class resolved; an error becomes the report's `error`).
BackendReport report_member(const BackendMember& m, const Platform& platform);

nlohmann::ordered_json to_json(const BackendReport& r);
/// {"platform", "mode", "backends": [to_json(report), ...]}: `attnsel list --json`.
nlohmann::ordered_json backends_json(const Platform& platform, const std::vector<BackendReport>& reports);

}  // namespace attnsel::report

#include "attnsel/platform.hpp"

#include <fmt/format.h>

namespace attnsel {

std::string_view mode_name(SelectionMode m) { return m == SelectionMode::reference ? "reference" : "runnable"; }

std::optional<SelectionMode> parse_mode(std::string_view s) {
  const std::string t = to_lower(s);
  if (t == "reference") return SelectionMode::reference;
  if (t == "runnable") return SelectionMode::runnable;
  return std::nullopt;
}

std::vector<std::string> Selection::warnings() const {
  std::vector<std::string> out;
  for (const LogLine& l : logs)
    if (l.level == LogLine::Level::warning) out.push_back(l.text);
  return out;
}

Platform::Platform(DeviceDescription device, RuntimeFacts facts, SelectionMode mode)
    : env_{std::move(device), std::move(facts)}, mode_(mode) {}

std::string Platform::spec() const {
  switch (kind()) {
    case PlatformKind::cuda: return fmt::format("cuda:{}", env_.device.capability ? env_.device.capability->str() : "?");
    case PlatformKind::rocm: return fmt::format("rocm:{}", env_.device.arch);
    case PlatformKind::cpu: return "cpu";
    case PlatformKind::xpu: return "xpu";
    case PlatformKind::other: return fmt::format("other:{}", env_.device.device_name);
  }
  return "other";
}

std::string Platform::describe() const {
  if (host_detail.empty()) return fmt::format("{} (simulated, {} mode)", spec(), mode_name(mode_));
  return fmt::format("{} ({}, {} mode)", spec(), host_detail, mode_name(mode_));
}

std::vector<BackendMember> Platform::backend_priorities(const AttentionSelectorConfig&, std::optional<int>) const {
  return {};
}

Platform::Checked Platform::resolve_and_validate(const BackendMember& member,
                                                 const AttentionSelectorConfig& config) const {
  Checked out;
  try {
    out.cls = member.get_attention_class();
  } catch (const ImportError& e) {
    out.reasons.push_back(fmt::format("ImportError: {}", e.what()));
    return out;
  }
  if (mode_ == SelectionMode::runnable && !out.cls->has_kernel()) {
    out.reasons.push_back(fmt::format("ImportError: {}", out.cls->missing_kernel_reason()));
    return out;
  }
  out.reasons = out.cls->validate_configuration(config, env_);
  if (mode_ == SelectionMode::runnable)
    for (std::string& gap : out.cls->kernel_gaps(config, env_)) out.reasons.push_back(std::move(gap));
  return out;
}

}  // namespace attnsel

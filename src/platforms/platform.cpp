#include "attnsel/platform.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "attnsel/capability_checks.hpp"
#include "platforms/record_cache.hpp"
#include "platforms/walk.hpp"

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
    : env_{std::move(device), std::move(facts)}, mode_(mode), records_(std::make_shared<RecordCache>()) {}

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

Platform::Checked Platform::check_backend(const BackendMember& member,
                                                 const AttentionSelectorConfig& config) const {
  Checked out;
  try {
    out.cls = member.get_attention_class();
  } catch (const Error& e) {
    // vLLM catches (ImportError, OSError): a class that cannot be loaded is an invalid candidate.
    if (e.kind() != ErrorKind::import && e.kind() != ErrorKind::os) throw;
    out.reasons.push_back(fmt::format("{}: {}", error_kind_name(e.kind()), e.what()));
    out.unavailable = true;
    return out;
  }
  if (mode_ == SelectionMode::runnable && !out.cls->has_kernel()) {
    out.reasons.push_back(fmt::format("ImportError: {}", out.cls->missing_kernel_reason()));
    out.unavailable = true;
    return out;
  }
  // validate_configuration(config, env_), with the class's record made once per platform.
  out.reasons = run_capability_checks(config, *records_->record(out.cls, env_), env_.device.capability);
  if (mode_ == SelectionMode::runnable)
    for (std::string& gap : out.cls->kernel_gaps(config, env_)) out.reasons.push_back(std::move(gap));
  return out;
}

void Platform::choose_by_priority(Selection& s, const std::vector<BackendMember>& priorities,
                                  const AttentionSelectorConfig& config, const ExtraCheck& extra) const {
  std::vector<std::shared_ptr<const AttentionBackend>> classes;
  for (std::size_t i = 0; i < priorities.size(); ++i) {
    Checked checked = check_backend(priorities[i], config);
    if (checked.unavailable)
      platforms::add_log(s, LogLine::Level::debug,
                         fmt::format("Attention backend {} is unavailable", priorities[i].name()), false);
    if (extra) extra(priorities[i], checked);
    s.candidates.push_back({priorities[i].name(), static_cast<int>(i), checked.reasons.empty(), checked.reasons});
    classes.push_back(std::move(checked.cls));
  }
  const std::string config_str = config.repr();
  const std::string why = platforms::reasons_str(s.candidates);
  platforms::add_log(s, LogLine::Level::debug,
                     fmt::format("Some attention backends are not valid for {} with {}. Reasons: {}.", device_name(),
                                 config_str, why));
  auto chosen = std::find_if(s.candidates.begin(), s.candidates.end(), [](const Candidate& c) { return c.valid; });
  if (chosen == s.candidates.end()) throw platforms::no_valid_backend(device_name(), config, std::move(s.candidates));
  const auto index = static_cast<std::size_t>(chosen - s.candidates.begin());
  s.priority = chosen->priority;
  platforms::accept_backend(s, chosen->backend, classes[index]);
}

}  // namespace attnsel
